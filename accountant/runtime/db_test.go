package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// The fixed instants the tests step through.
var (
	t0 = time.Date(2026, 8, 14, 9, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Minute)
	t2 = t0.Add(2 * time.Minute)
	t3 = t0.Add(3 * time.Minute)
)

func openTemp(t testing.TB) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "governance.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

func admin(at time.Time) Stamp { return Stamp{Who: "admin", At: at} }

// wantRefusal checks err is an *Error of kind k whose reason is exactly
// reason.
func wantRefusal(t *testing.T, err error, k Kind, reason string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want a refusal of kind %d", err, k)
	}
	if e.Kind != k || e.Reason != reason {
		t.Fatalf("refusal = kind %d %q\nwant      kind %d %q", e.Kind, e.Reason, k, reason)
	}
}

func TestOpenMigratesFromEmpty(t *testing.T) {
	db, _ := openTemp(t)
	var v int
	if err := db.sql.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != SchemaVersion() || v != len(migrations) {
		t.Fatalf("user_version = %d, want %d", v, SchemaVersion())
	}
	var mode string
	if err := db.sql.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	for _, table := range []string{"meta", "versions", "nodes", "keys", "overrides", "admins", "audit"} {
		var n int
		if err := db.sql.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&n); err != nil || n != 1 {
			t.Errorf("table %s: count %d, %v", table, n, err)
		}
	}
	kv, keys, err := db.Keys()
	if err != nil || len(keys) != 0 || !strings.HasSuffix(kv, ".0") {
		t.Fatalf("Keys() = %q, %v, %v; want an empty table at version <id>.0", kv, keys, err)
	}
	rv, rt, err := db.Runtime()
	if err != nil || len(rt.Nodes)+len(rt.Overrides) != 0 || !strings.HasSuffix(rv, ".0") {
		t.Fatalf("Runtime() = %q, %+v, %v", rv, rt, err)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	db, path := openTemp(t)
	if _, err := db.sql.Exec(`PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err := Open(path)
	want := "runtime: open " + path + ": schema version 99 is newer than this build's " + strconv.Itoa(SchemaVersion()) + "; run a tokentriage at least as new as the one that wrote it"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

func TestOpenEmptyPath(t *testing.T) {
	_, err := Open("")
	if err == nil || err.Error() != "runtime: open governance.db: empty path; pass the file under the accountant's --data directory" {
		t.Fatalf("err = %v", err)
	}
}

func TestReopenPersists(t *testing.T) {
	p := seedPlan()
	db, path := openTemp(t)
	if _, err := db.CreateNode(p, "org:beta", admin(t0)); err != nil {
		t.Fatal(err)
	}
	key, k, err := db.MintKey(p, "org:beta", vkey.Scopes{Models: []string{"gpt-*"}}, admin(t1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutOverride(p, govern.Override{LimitID: "org_monthly_budget", Node: "org:beta", Amount: 50 * usd}, admin(t2)); err != nil {
		t.Fatal(err)
	}
	tok, _, err := db.CreateAdmin(p, "org:beta", admin(t3))
	if err != nil {
		t.Fatal(err)
	}
	kv, keys, _ := db.Keys()
	rv, rt, _ := db.Runtime()
	audit, _ := db.Audit(0, 0, "")
	db.Close()

	db2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	kv2, keys2, err := db2.Keys()
	if err != nil || kv2 != kv || !jsonEqual(keys2, keys) {
		t.Fatalf("after reopen Keys() = %q %+v %v; want %q %+v", kv2, keys2, err, kv, keys)
	}
	if keys2[0].SHA256 != vkey.Hash(key) || keys2[0].KID != k.KID {
		t.Fatalf("key row %+v does not match the minted key", keys2[0])
	}
	rv2, rt2, err := db2.Runtime()
	if err != nil || rv2 != rv || !jsonEqual(rt2, rt) {
		t.Fatalf("after reopen Runtime() = %q %+v %v; want %q %+v", rv2, rt2, err, rv, rt)
	}
	audit2, err := db2.Audit(0, 0, "")
	if err != nil || !jsonEqual(audit2, audit) || len(audit2) != 4 {
		t.Fatalf("after reopen audit = %+v, %v", audit2, err)
	}
	if a, ok, err := db2.AdminByToken(tok); err != nil || !ok || a.Scope != "org:beta" {
		t.Fatalf("AdminByToken after reopen = %+v %v %v", a, ok, err)
	}
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// TestEveryWriteAudited walks through one of each write and reads the audit
// log back: one row per write, in order, with who, when, target and the
// before and after views.
func TestEveryWriteAudited(t *testing.T) {
	p := seedPlan()
	db, _ := openTemp(t)
	var (
		s0 = Stamp{"admin", t0}
		s1 = Stamp{"adm_000000000001", t1}
	)
	mustDo(t, func() error { _, err := db.CreateNode(p, "org:acme/team:infra", s0); return err })
	_, k, err := db.MintKey(p, "org:acme/team:infra", vkey.Scopes{}, s1)
	if err != nil {
		t.Fatal(err)
	}
	o := govern.Override{LimitID: "team_daily_requests", Node: "org:acme/team:infra", Amount: 30000}
	mustDo(t, func() error { _, err := db.PutOverride(p, o, s0); return err })
	o.Amount = 35000
	mustDo(t, func() error { _, err := db.PutOverride(p, o, s1); return err })
	mustDo(t, func() error { _, err := db.DeleteOverride(o.LimitID, o.Node, s0); return err })
	mustDo(t, func() error { _, err := db.RevokeKey(k.KID, s1); return err })
	_, a, err := db.CreateAdmin(p, "org:acme/team:infra", s0)
	if err != nil {
		t.Fatal(err)
	}
	mustDo(t, func() error { _, err := db.RevokeAdmin(a.ID, s1); return err })
	mustDo(t, func() error { _, err := db.DeleteNode("org:acme/team:infra", s0); return err })

	// Refused writes leave no audit row.
	if _, err := db.CreateNode(p, "org:acme", s0); err == nil {
		t.Fatal("creating a config node succeeded")
	}
	if _, err := db.PutOverride(p, govern.Override{LimitID: "team_rpm", Node: "org:acme/team:ml", Amount: 1}, s0); err == nil {
		t.Fatal("an rpm override succeeded")
	}

	got, err := db.Audit(0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ who, action, target, before, after string }
	want := []row{
		{"admin", ActionNodeCreate, "org:acme/team:infra", "null", `{"id":"org:acme/team:infra","created_at":"2026-08-14T09:00:00Z","created_by":"admin"}`},
		{"adm_000000000001", ActionKeyMint, k.KID, "null", `{"kid":"` + k.KID + `","name":"","owner":"org:acme/team:infra","scopes":{"models":null,"providers":null,"endpoints":null,"allow_passthrough":false},"created_at":"2026-08-14T09:01:00Z","created_by":"adm_000000000001","expires_at":null,"revoked_at":null}`},
		{"admin", ActionOverridePut, "team_daily_requests@org:acme/team:infra", "null", `{"limit_id":"team_daily_requests","node":"org:acme/team:infra","amount":30000,"set_by":"admin","set_at":"2026-08-14T09:00:00Z"}`},
		{"adm_000000000001", ActionOverridePut, "team_daily_requests@org:acme/team:infra",
			`{"limit_id":"team_daily_requests","node":"org:acme/team:infra","amount":30000,"set_by":"admin","set_at":"2026-08-14T09:00:00Z"}`,
			`{"limit_id":"team_daily_requests","node":"org:acme/team:infra","amount":35000,"set_by":"adm_000000000001","set_at":"2026-08-14T09:01:00Z"}`},
		{"admin", ActionOverrideDelete, "team_daily_requests@org:acme/team:infra",
			`{"limit_id":"team_daily_requests","node":"org:acme/team:infra","amount":35000,"set_by":"adm_000000000001","set_at":"2026-08-14T09:01:00Z"}`, "null"},
		{"adm_000000000001", ActionKeyRevoke, k.KID,
			`{"kid":"` + k.KID + `","name":"","owner":"org:acme/team:infra","scopes":{"models":null,"providers":null,"endpoints":null,"allow_passthrough":false},"created_at":"2026-08-14T09:01:00Z","created_by":"adm_000000000001","expires_at":null,"revoked_at":null}`,
			`{"kid":"` + k.KID + `","name":"","owner":"org:acme/team:infra","scopes":{"models":null,"providers":null,"endpoints":null,"allow_passthrough":false},"created_at":"2026-08-14T09:01:00Z","created_by":"adm_000000000001","expires_at":null,"revoked_at":"2026-08-14T09:01:00Z","revoked_by":"adm_000000000001"}`},
		{"admin", ActionAdminCreate, a.ID, "null", `{"id":"` + a.ID + `","scope":"org:acme/team:infra","created_at":"2026-08-14T09:00:00Z","created_by":"admin","revoked_at":null}`},
		{"adm_000000000001", ActionAdminRevoke, a.ID,
			`{"id":"` + a.ID + `","scope":"org:acme/team:infra","created_at":"2026-08-14T09:00:00Z","created_by":"admin","revoked_at":null}`,
			`{"id":"` + a.ID + `","scope":"org:acme/team:infra","created_at":"2026-08-14T09:00:00Z","created_by":"admin","revoked_at":"2026-08-14T09:01:00Z","revoked_by":"adm_000000000001"}`},
		{"admin", ActionNodeDelete, "org:acme/team:infra", `{"id":"org:acme/team:infra","created_at":"2026-08-14T09:00:00Z","created_by":"admin"}`, "null"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d audit rows, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		at := t0
		if w.who != "admin" {
			at = t1
		}
		if g.Seq != int64(i+1) || g.Who != w.who || g.Action != w.action || g.Target != w.target ||
			!g.At.Equal(at) || g.Node != "org:acme/team:infra" || string(g.Before) != w.before || string(g.After) != w.after {
			t.Errorf("step %d: audit row\n%d %s %s %s %s %s\nbefore %s\nafter  %s\nwant\n%s %s %s\nbefore %s\nafter  %s",
				i, g.Seq, g.At.Format(time.RFC3339), g.Who, g.Action, g.Target, g.Node, g.Before, g.After, w.who, w.action, w.target, w.before, w.after)
		}
	}

	// Paging and subtree filtering.
	page, _ := db.Audit(2, 3, "")
	if len(page) != 3 || page[0].Seq != 3 || page[2].Seq != 5 {
		t.Fatalf("Audit(2, 3) = %+v", page)
	}
	if mine, _ := db.Audit(0, 0, "org:acme"); len(mine) != len(want) {
		t.Fatalf("Audit scoped to org:acme has %d rows, want %d", len(mine), len(want))
	}
	if theirs, _ := db.Audit(0, 0, "org:acme/team:ml"); len(theirs) != 0 {
		t.Fatalf("Audit scoped to org:acme/team:ml has %d rows, want 0", len(theirs))
	}
}

func mustDo(t *testing.T, f func() error) {
	t.Helper()
	if err := f(); err != nil {
		t.Fatal(err)
	}
}

// TestVersionsBumpOnWritesOnly: reads and refused writes leave both versions
// alone; key writes move the keys version only, node and override writes the
// runtime version only, admin writes neither.
func TestVersionsBumpOnWritesOnly(t *testing.T) {
	p := seedPlan()
	db, _ := openTemp(t)
	versions := func() (string, string) {
		kv, _, err := db.Keys()
		if err != nil {
			t.Fatal(err)
		}
		rv, _, err := db.Runtime()
		if err != nil {
			t.Fatal(err)
		}
		return kv, rv
	}
	k0, r0 := versions()
	steps := []struct {
		name     string
		do       func() error
		keys, rt bool // which versions move
	}{
		{"read again", func() error { _, err := db.ListKeys(""); return err }, false, false},
		{"node create", func() error { _, err := db.CreateNode(p, "org:beta", admin(t0)); return err }, false, true},
		{"refused node create", func() error { _, err := db.CreateNode(p, "org:beta", admin(t0)); return nil2(err) }, false, false},
		{"mint", func() error { _, _, err := db.MintKey(p, "org:beta", vkey.Scopes{}, admin(t0)); return err }, true, false},
		{"refused mint", func() error { _, _, err := db.MintKey(p, "org:nope", vkey.Scopes{}, admin(t0)); return nil2(err) }, false, false},
		{"override put", func() error {
			_, err := db.PutOverride(p, govern.Override{LimitID: "org_monthly_budget", Node: "org:beta", Amount: usd}, admin(t0))
			return err
		}, false, true},
		{"refused override", func() error {
			_, err := db.PutOverride(p, govern.Override{LimitID: "org_monthly_budget", Node: "org:beta", Amount: 0}, admin(t0))
			return nil2(err)
		}, false, false},
		{"admin create", func() error { _, _, err := db.CreateAdmin(p, "org:beta", admin(t0)); return err }, false, false},
		{"override delete", func() error { _, err := db.DeleteOverride("org_monthly_budget", "org:beta", admin(t0)); return err }, false, true},
	}
	for i, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("step %d (%s): %v", i, s.name, err)
		}
		k1, r1 := versions()
		if (k1 != k0) != s.keys || (r1 != r0) != s.rt {
			t.Errorf("step %d (%s): keys %s→%s, runtime %s→%s; want keys moved=%v runtime moved=%v", i, s.name, k0, k1, r0, r1, s.keys, s.rt)
		}
		k0, r0 = k1, r1
	}
}

// nil2 turns an expected refusal into success and an unexpected success
// into an error, for steps that must fail.
func nil2(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return nil
	}
	if err == nil {
		return errors.New("the write succeeded; want a refusal")
	}
	return err
}

func TestNodeCharsetAndShape(t *testing.T) {
	p := seedPlan()
	db, _ := openTemp(t)
	mustDo(t, func() error { _, err := db.CreateNode(p, "org:beta", admin(t0)); return err })
	for i, c := range []struct {
		id     string
		kind   Kind
		reason string
	}{
		{"org:beta/team:ml", 0, ""},
		{"org:acme/team:infra", 0, ""},
		{"org:acme/team:ml/user:dev3", 0, ""},
		{"org:acme/team:ml", Conflict, `node "org:acme/team:ml" is declared in the config's tenants and is already in force; no runtime node was created`},
		{"org:beta", Conflict, `node "org:beta" already exists in the runtime plane`},
		{"org:gamma/team:ml", Invalid, `parent node "org:gamma" of "org:gamma/team:ml" does not exist; create "org:gamma" first`},
		{"team:ml", Invalid, `node "team:ml" ends in a "team" segment at depth 1; the tree is org:<id>/team:<id>/user:<id>, so write org:<id> there`},
		{"org:acme/user:dev9", Invalid, `node "org:acme/user:dev9" ends in a "user" segment at depth 2; the tree is org:<id>/team:<id>/user:<id>, so write team:<id> there`},
		{"org:acme/team:ml/user:dev1/key:x", Invalid, `node "org:acme/team:ml/user:dev1/key:x" is deeper than a user; the tree is org:<id>/team:<id>/user:<id>, and a user's keys are minted with keys mint --owner`},
	} {
		_, err := db.CreateNode(p, c.id, admin(t1))
		if c.kind == 0 {
			if err != nil {
				t.Errorf("step %d: CreateNode(%q) = %v", i, c.id, err)
			}
			continue
		}
		wantRefusal(t, err, c.kind, c.reason)
	}
	for i, id := range []string{"", "org:Acme", "org:acme/../org:evil", "org:acme/..", "org:acme team", "org:", ":acme", "ORG:acme", "org:acme/", "/org:acme", "org:acme//team:ml", "__global", "org:acme\x00"} {
		_, err := db.CreateNode(p, id, admin(t1))
		var e *Error
		if !errors.As(err, &e) || e.Kind != Invalid || !strings.HasPrefix(e.Reason, "node "+quote(id)+" is not a valid node id: ") {
			t.Errorf("step %d: CreateNode(%q) = %v; want an invalid node id refusal", i, id, err)
		}
		if _, _, err := db.MintKey(p, id, vkey.Scopes{}, admin(t1)); !errors.As(err, &e) || e.Kind != Invalid || !strings.HasPrefix(e.Reason, "owner "+quote(id)+" is not a valid node id: ") {
			t.Errorf("step %d: MintKey(owner %q) = %v; want an invalid node id refusal", i, id, err)
		}
	}
	nodes, err := db.Nodes()
	if err != nil || len(nodes) != 4 {
		t.Fatalf("Nodes() = %+v, %v; want 4", nodes, err)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return strings.ReplaceAll(string(b), `\u0000`, `\x00`)
}

func TestDeleteNode(t *testing.T) {
	p := seedPlan()
	db, _ := openTemp(t)
	for _, id := range []string{"org:beta", "org:beta/team:ml", "org:beta/team:ml/user:ann"} {
		mustDo(t, func() error { _, err := db.CreateNode(p, id, admin(t0)); return err })
	}
	_, k, err := db.MintKey(p, "org:beta/team:ml/user:ann", vkey.Scopes{}, admin(t0))
	if err != nil {
		t.Fatal(err)
	}
	mustDo(t, func() error {
		_, err := db.PutOverride(p, govern.Override{LimitID: "team_daily_requests", Node: "org:beta/team:ml", Amount: 5}, admin(t0))
		return err
	})
	_, err = db.DeleteNode("org:beta", admin(t1))
	wantRefusal(t, err, Conflict, `node "org:beta" is still in use (2 child nodes); delete its child nodes, revoke its keys and admins and delete its overrides first`)
	_, err = db.DeleteNode("org:beta/team:ml", admin(t1))
	wantRefusal(t, err, Conflict, `node "org:beta/team:ml" is still in use (1 child node, 1 override); delete its child nodes, revoke its keys and admins and delete its overrides first`)
	_, err = db.DeleteNode("org:beta/team:ml/user:ann", admin(t1))
	wantRefusal(t, err, Conflict, `node "org:beta/team:ml/user:ann" is still in use (1 live key); delete its child nodes, revoke its keys and admins and delete its overrides first`)
	_, err = db.DeleteNode("org:acme", admin(t1))
	wantRefusal(t, err, NotFound, `no runtime node "org:acme"; a node declared in the config is removed by editing its tenants`)
	_, err = db.DeleteNode("org:acme/../org:beta", admin(t1))
	var e *Error
	if !errors.As(err, &e) || e.Kind != Invalid {
		t.Fatalf("DeleteNode with .. = %v", err)
	}

	mustDo(t, func() error { _, err := db.RevokeKey(k.KID, admin(t1)); return err })
	mustDo(t, func() error { _, err := db.DeleteNode("org:beta/team:ml/user:ann", admin(t1)); return err })
	mustDo(t, func() error {
		_, err := db.DeleteOverride("team_daily_requests", "org:beta/team:ml", admin(t1))
		return err
	})
	mustDo(t, func() error { _, err := db.DeleteNode("org:beta/team:ml", admin(t1)); return err })
	mustDo(t, func() error { _, err := db.DeleteNode("org:beta", admin(t1)); return err })
	if nodes, _ := db.Nodes(); len(nodes) != 0 {
		t.Fatalf("nodes left: %+v", nodes)
	}
}

// TestMintStoresOnlyTheHash mints a key and looks for it in every byte the
// database wrote: it must not be there, and its SHA-256 must be.
func TestMintStoresOnlyTheHash(t *testing.T) {
	p := seedPlan()
	db, path := openTemp(t)
	sc := vkey.Scopes{Models: []string{"gpt-4o*"}, Providers: []string{"openai"}, Endpoints: []string{"/v1/chat/completions"}, AllowPassthrough: true}
	key, k, err := db.MintKey(p, "org:acme/team:ml/user:dev1", sc, admin(t0))
	if err != nil {
		t.Fatal(err)
	}
	kid, err := vkey.KID(key)
	if err != nil || kid != k.KID {
		t.Fatalf("minted %q with kid %q; KID() = %q, %v", key, k.KID, kid, err)
	}
	if k.Owner != "org:acme/team:ml/user:dev1" || !jsonEqual(k.Scopes, sc) || !k.CreatedAt.Equal(t0) || k.CreatedBy != "admin" || k.RevokedAt != nil {
		t.Fatalf("key details %+v", k)
	}
	_, keys, _ := db.Keys()
	if len(keys) != 1 || keys[0].SHA256 != vkey.Hash(key) || keys[0].Owner != k.Owner || keys[0].Revoked || !jsonEqual(keys[0].Scopes, sc) {
		t.Fatalf("Keys() = %+v", keys)
	}
	var files []byte
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + suffix)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		files = append(files, b...)
	}
	secret := key[strings.LastIndexByte(key, '-')+1:]
	if bytes.Contains(files, []byte(secret)) {
		t.Fatal("the key's secret is stored in governance.db")
	}
	if !bytes.Contains(files, []byte(vkey.Hash(key))) {
		t.Fatal("the key's hash is not in governance.db")
	}

	got, err := db.Key(k.KID)
	if err != nil || !jsonEqual(got, k) {
		t.Fatalf("Key(%s) = %+v, %v", k.KID, got, err)
	}
	_, err = db.Key("vk_000000000000")
	wantRefusal(t, err, NotFound, "no key vk_000000000000; keys list shows the minted kids")
	_, err = db.RevokeKey("vk_nope", admin(t1))
	wantRefusal(t, err, Invalid, `"vk_nope" is not a kid (expected vk_ followed by 12 letters and digits)`)
	if _, err := db.RevokeKey(k.KID, admin(t1)); err != nil {
		t.Fatal(err)
	}
	_, err = db.RevokeKey(k.KID, admin(t2))
	wantRefusal(t, err, Conflict, "key "+k.KID+" was already revoked at 2026-08-14T09:01:00Z by admin")
	if _, keys, _ := db.Keys(); !keys[0].Revoked {
		t.Fatal("revoked key not marked revoked in Keys()")
	}
}

func TestMintChecksOwnerAndScopes(t *testing.T) {
	p := seedPlan()
	db, _ := openTemp(t)
	_, _, err := db.MintKey(p, "org:acme/team:ml/user:dev9", vkey.Scopes{}, admin(t0))
	wantRefusal(t, err, Invalid, `owner "org:acme/team:ml/user:dev9" is not a node of the tenancy tree; declare it in the config's tenants or create it with POST /tt/api/v1/nodes first`)
	_, _, err = db.MintKey(p, "org:acme", vkey.Scopes{Models: []string{"gpt-[4"}}, admin(t0))
	wantRefusal(t, err, Invalid, `scopes.models[0]: malformed pattern "gpt-[4": syntax error in pattern (patterns use Go's path.Match, where * does not cross a /)`)
	_, _, err = db.MintKey(p, "org:acme", vkey.Scopes{Providers: []string{""}}, admin(t0))
	wantRefusal(t, err, Invalid, `scopes.providers[0]: an empty entry matches no provider; omit the list to allow every provider`)
	_, _, err = db.MintKey(p, "org:acme", vkey.Scopes{Endpoints: []string{"/v1/chat"}}, admin(t0))
	wantRefusal(t, err, Invalid, `scopes.endpoints[0]: "/v1/chat" is not a governed provider endpoint, so no request would match it; an endpoint scope is one of /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses, /v1/messages (other paths, such as GET /v1/models, are let through by allow_passthrough)`)
	_, _, err = db.MintKey(p, "org:acme", vkey.Scopes{Endpoints: []string{"/v1/messages", "/v1/chat/completions/"}}, admin(t0))
	wantRefusal(t, err, Invalid, `scopes.endpoints[1]: "/v1/chat/completions/" never matches: a request to a governed endpoint is matched by its canonical path, whatever route prefix it was sent under; write "/v1/chat/completions"`)
	_, _, err = db.MintKey(p, "org:acme", vkey.Scopes{Providers: []string{"OpenAI"}}, admin(t0))
	wantRefusal(t, err, Invalid, `scopes.providers[0]: "OpenAI" never matches: provider names are lowercase letters, digits, '-', '_' and '.', compared exactly; write "openai"`)
	_, _, err = db.MintKey(p, "org:acme", vkey.Scopes{Providers: []string{"openai "}}, admin(t0))
	wantRefusal(t, err, Invalid, `scopes.providers[0]: "openai " never matches: provider names are lowercase letters, digits, '-', '_' and '.', compared exactly; write "openai"`)
	_, _, err = db.MintKey(p, "org:acme", vkey.Scopes{Providers: []string{" "}}, admin(t0))
	wantRefusal(t, err, Invalid, `scopes.providers[0]: an empty entry matches no provider; omit the list to allow every provider`)
	if _, _, err := db.MintKey(p, "org:acme", vkey.Scopes{Providers: []string{"anthropic", "azure"}, Endpoints: govern.GovernedEndpoints()}, admin(t0)); err != nil {
		t.Fatalf("every governed endpoint and a mapped provider name: %v", err)
	}
	if w := ScopeWarnings(vkey.Scopes{Providers: []string{"openai", "openia"}}); len(w) != 1 || w[0] != `provider "openia" is not one the gateway infers from the path (openai, anthropic): the key reaches it only if the filter's providers mapping names a provider exactly "openia"` {
		t.Errorf("warnings %q", w)
	}
	_, _, err = db.MintKey(p, "org:acme", vkey.Scopes{Models: []string{}}, admin(t0))
	wantRefusal(t, err, Invalid, `scopes.models: an empty list allows no model at all; omit it (or write null) to allow every model, or list the ones the key may use`)
	mustDo(t, func() error { _, err := db.CreateNode(p, "org:acme/team:ml/user:dev9", admin(t0)); return err })
	if _, _, err := db.MintKey(p, "org:acme/team:ml/user:dev9", vkey.Scopes{}, admin(t0)); err != nil {
		t.Fatalf("minting for a runtime node: %v", err)
	}
	keys, err := db.ListKeys("org:acme/team:ml")
	if err != nil || len(keys) != 1 {
		t.Fatalf("ListKeys(org:acme/team:ml) = %+v, %v", keys, err)
	}
	if keys, _ := db.ListKeys("org:acme/team:m"); len(keys) != 0 {
		t.Fatalf("ListKeys matched a partial segment: %+v", keys)
	}
}

// TestOverrideRules: every rule govern applies when it arms, with the exact
// reason a refused write answers with.
func TestOverrideRules(t *testing.T) {
	p := seedPlan()
	db, _ := openTemp(t)
	mustDo(t, func() error { _, err := db.CreateNode(p, "org:beta", admin(t0)); return err })
	for i, c := range []struct {
		limit, node string
		amount      int64
		kind        Kind
		reason      string
	}{
		{"org_monthly_budget", "org:acme", 5000 * usd, 0, ""},
		{"org_monthly_budget", "org:beta", 1, 0, ""},
		{"ml_daily", "org:acme/team:ml", 1 << 50, 0, ""},
		{"team_daily_requests", "org:acme/team:search", 40000, 0, ""},
		{"global_requests", govern.Global, 5, 0, ""},
		{"team_rpm", "org:acme/team:ml", 10, Invalid, `limit type "rpm" does not support per-node overrides (its cap is enforced by a per-window/gauge store that cannot honor a per-node amount); overrides apply only to spend/quota limits (budget_usd, quota_tokens, quota_requests)`},
		{"team_tpm", "org:acme/team:ml", 10, Invalid, `limit type "tpm" does not support per-node overrides (its cap is enforced by a per-window/gauge store that cannot honor a per-node amount); overrides apply only to spend/quota limits (budget_usd, quota_tokens, quota_requests)`},
		{"user_concurrency", "org:acme/team:ml/user:dev1", 10, Invalid, `limit type "concurrency" does not support per-node overrides (its cap is enforced by a per-window/gauge store that cannot honor a per-node amount); overrides apply only to spend/quota limits (budget_usd, quota_tokens, quota_requests)`},
		{"team_monthly_tokens", "org:acme/team:ml", 10, Invalid, `limit "team_monthly_tokens" does not allow per-node overrides; set override: { allow: true } on it in the config and reload`},
		{"org_monthly_budget", "org:acme", 0, Invalid, `override amount $0 of limit "org_monthly_budget" must be greater than zero (zero or less would switch the cap off rather than lower it); delete the override to return to the template's amount`},
		{"team_daily_requests", "org:acme/team:ml", -3, Invalid, `override amount -3 of limit "team_daily_requests" must be greater than zero (zero or less would switch the cap off rather than lower it); delete the override to return to the template's amount`},
		{"org_monthly_budget", "org:acme", 5000*usd + 1, Invalid, `override amount $5000.000000001 of limit "org_monthly_budget" exceeds its ceiling $5000 (override.max_amount_usd); raise the ceiling in the config first`},
		{"team_daily_requests", "org:acme/team:ml", 40001, Invalid, `override amount 40001 of limit "team_daily_requests" exceeds its ceiling 40000 (override.max_amount); raise the ceiling in the config first`},
		{"no_such_limit", "org:acme", 1, NotFound, `limit "no_such_limit" is not armed; GET /tt/api/v1/governance/limits lists the armed limit ids`},
		{"ml_daily", "org:acme/team:search", 1, Invalid, `limit "ml_daily" is pinned to node "org:acme/team:ml" and has no instance at node "org:acme/team:search"`},
		{"org_monthly_budget", "org:acme/team:ml", 1, Invalid, `limit "org_monthly_budget" is a template at level "org" and has no instance at the team node "org:acme/team:ml"; name an org node`},
		{"org_monthly_budget", "org:gamma", 1, Invalid, `node "org:gamma" is not a node of the tenancy tree; declare it in the config's tenants or create it with POST /tt/api/v1/nodes first`},
		{"org_monthly_budget", govern.Global, 1, Invalid, `limit "org_monthly_budget" is a template at level "org" and has no instance at node "__global"`},
		{"org_monthly_budget", "org:acme/../org:beta", 1, Invalid, `node "org:acme/../org:beta" is not a valid node id: ` + nodeIDErr("org:acme/../org:beta")},
	} {
		got, err := db.PutOverride(p, govern.Override{LimitID: c.limit, Node: c.node, Amount: c.amount}, admin(t1))
		if c.kind == 0 {
			if err != nil {
				t.Errorf("step %d: PutOverride(%s@%s = %d) = %v", i, c.limit, c.node, c.amount, err)
			} else if got.Amount != c.amount || got.SetBy != "admin" || !got.SetAt.Equal(t1) {
				t.Errorf("step %d: PutOverride = %+v", i, got)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Kind != c.kind || e.Reason != c.reason {
			t.Errorf("step %d: PutOverride(%s@%s = %d) = %v\nwant reason: %s", i, c.limit, c.node, c.amount, err, c.reason)
		}
	}
	_, rt, _ := db.Runtime()
	want := []govern.Override{
		{LimitID: "global_requests", Node: govern.Global, Amount: 5},
		{LimitID: "ml_daily", Node: "org:acme/team:ml", Amount: 1 << 50},
		{LimitID: "org_monthly_budget", Node: "org:acme", Amount: 5000 * usd},
		{LimitID: "org_monthly_budget", Node: "org:beta", Amount: 1},
		{LimitID: "team_daily_requests", Node: "org:acme/team:search", Amount: 40000},
	}
	if !jsonEqual(rt.Overrides, want) || !jsonEqual(rt.Nodes, []string{"org:beta"}) {
		t.Fatalf("Runtime() = %+v\nwant overrides %+v", rt, want)
	}
	_, err := db.DeleteOverride("ml_daily", "org:acme/team:search", admin(t2))
	wantRefusal(t, err, NotFound, `no override of limit "ml_daily" at node "org:acme/team:search"`)
	if ovs, _ := db.Overrides("org:acme"); len(ovs) != 3 {
		t.Fatalf("Overrides(org:acme) = %+v", ovs)
	}
}

func nodeIDErr(id string) string { return govern.ValidNodeID(id).Error() }

func TestAdminTokens(t *testing.T) {
	p := seedPlan()
	db, _ := openTemp(t)
	tok, a, err := db.CreateAdmin(p, "org:acme/team:ml", admin(t0))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "tt-adm_") || !strings.HasPrefix(a.ID, "adm_") || a.Scope != "org:acme/team:ml" {
		t.Fatalf("token %q, admin %+v", tok, a)
	}
	if got, ok, err := db.AdminByToken(tok); err != nil || !ok || got.ID != a.ID {
		t.Fatalf("AdminByToken = %+v %v %v", got, ok, err)
	}
	forged := tok[:len(tok)-1] + string("0123456789"[(strings.IndexByte("0123456789", tok[len(tok)-1])+1)%10])
	if tok[len(tok)-1] < '0' || tok[len(tok)-1] > '9' {
		forged = tok[:len(tok)-1] + "0"
	}
	for i, bad := range []string{"", "admin", forged, "tt-vk_" + strings.TrimPrefix(tok, "tt-adm_"), tok + "x", "tt-adm_000000000000-00000000000000000000000000000000"} {
		if _, ok, err := db.AdminByToken(bad); ok || err != nil {
			t.Errorf("step %d: AdminByToken(%q) = %v, %v; want not ok", i, bad, ok, err)
		}
	}
	_, _, err = db.CreateAdmin(p, "org:nope", admin(t0))
	wantRefusal(t, err, Invalid, `scope "org:nope" is not a node of the tenancy tree; declare it in the config's tenants or create it with POST /tt/api/v1/nodes first`)
	if _, err := db.RevokeAdmin(a.ID, admin(t1)); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := db.AdminByToken(tok); ok {
		t.Fatal("a revoked admin token still authenticates")
	}
	_, err = db.RevokeAdmin(a.ID, admin(t2))
	wantRefusal(t, err, Conflict, "delegated admin "+a.ID+" was already revoked at 2026-08-14T09:01:00Z by admin")
	_, err = db.RevokeAdmin("adm_x", admin(t2))
	wantRefusal(t, err, Invalid, `"adm_x" is not an admin id (expected adm_ followed by 12 letters and digits)`)
	_, err = db.RevokeAdmin("adm_000000000000", admin(t2))
	wantRefusal(t, err, NotFound, "no delegated admin adm_000000000000; GET /tt/api/v1/admins lists them")
	admins, _ := db.Admins()
	if len(admins) != 1 || admins[0].RevokedAt == nil {
		t.Fatalf("Admins() = %+v", admins)
	}
}

// TestConcurrentWrites mints from several goroutines at once: every mint
// commits with its audit row and the keys version counts each one.
func TestConcurrentWrites(t *testing.T) {
	p := seedPlan()
	db, _ := openTemp(t)
	const workers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, _, err := db.MintKey(p, "org:acme", vkey.Scopes{}, admin(t0)); err != nil {
					errs <- err
				}
				if _, _, err := db.Keys(); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	v, keys, _ := db.Keys()
	if len(keys) != workers*each || !strings.HasSuffix(v, ".80") {
		t.Fatalf("%d keys at version %s; want 80 at .80", len(keys), v)
	}
	if a, _ := db.Audit(0, 0, ""); len(a) != workers*each {
		t.Fatalf("%d audit rows, want %d", len(a), workers*each)
	}
}

// TestOpenSaysWhatToDo: a governance.db that is not a database, is
// damaged, or is a directory is refused with what to do about it.
func TestOpenSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.db")
	os.WriteFile(junk, bytes.Repeat([]byte("not a database "), 1000), 0o644)
	asDir := filepath.Join(dir, "dir.db")
	os.Mkdir(asDir, 0o755)
	for path, want := range map[string]string{
		junk:  "restore it from a backup, or move it aside",
		asDir: "check that it is a file (not a directory)",
	} {
		db, err := Open(path)
		if err == nil {
			db.Close()
			t.Errorf("%s opened", path)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", path, err)
		}
	}
}
