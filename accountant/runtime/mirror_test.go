package runtime

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// sameState checks a mirror answers exactly what its owner does: the key
// table and runtime plane with their versions, the plane version, the
// audit log, the admins.
func sameState(t *testing.T, step string, owner, mirror *DB) {
	t.Helper()
	type state struct {
		KeysV, RuntimeV, PlaneV string
		Keys                    any
		RT                      govern.Runtime
		Audit                   []AuditEntry
		Admins                  []Admin
		Overrides               []Override
	}
	get := func(db *DB) state {
		var s state
		var err error
		var keys any
		if s.KeysV, keys, err = db.Keys(); err != nil {
			t.Fatal(err)
		}
		s.Keys = keys
		if s.RuntimeV, s.RT, err = db.Runtime(); err != nil {
			t.Fatal(err)
		}
		if s.PlaneV, err = db.PlaneVersion(); err != nil {
			t.Fatal(err)
		}
		if s.Audit, err = db.Audit(0, 0, ""); err != nil {
			t.Fatal(err)
		}
		if s.Admins, err = db.Admins(); err != nil {
			t.Fatal(err)
		}
		if s.Overrides, err = db.Overrides(""); err != nil {
			t.Fatal(err)
		}
		return s
	}
	o, m := get(owner), get(mirror)
	if !reflect.DeepEqual(o, m) {
		ob, _ := json.Marshal(o)
		mb, _ := json.Marshal(m)
		t.Fatalf("%s: the mirror differs from its owner\nowner  %s\nmirror %s", step, ob, mb)
	}
}

func pull(t *testing.T, owner, mirror *DB) Plane {
	t.Helper()
	have, err := mirror.PlaneVersion()
	if err != nil {
		t.Fatal(err)
	}
	p, err := owner.Plane(have)
	if err != nil {
		t.Fatal(err)
	}
	applyFromTheWire(t, mirror, p)
	return p
}

// applyFromTheWire applies p to mirror through JSON, as on the wire.
func applyFromTheWire(t *testing.T, mirror *DB, p Plane) {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var wire Plane
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	if err := mirror.ApplyPlane(wire); err != nil {
		t.Fatal(err)
	}
}

// TestMirrorHoldsTheOwnersPlane: a mirror that applies the owner's copies
// answers exactly what the owner does, versions included; each later copy
// carries only the audit entries the mirror lacks; a revoked key and a
// deleted override reach it; the mirror refuses writes of its own.
func TestMirrorHoldsTheOwnersPlane(t *testing.T) {
	p := seedPlan()
	owner, _ := openTemp(t)
	mirror, _ := openTemp(t)
	if err := mirror.CheckMirror(); err != nil {
		t.Fatalf("an empty database cannot mirror: %v", err)
	}
	pull(t, owner, mirror)
	sameState(t, "empty", owner, mirror)

	mustDo(t, func() error { _, err := owner.CreateNode(p, "org:acme/team:infra", admin(t0)); return err })
	key, k, err := owner.MintKey(p, "org:acme/team:infra", vkey.Scopes{Models: []string{"gpt-4o*"}}, admin(t1))
	if err != nil {
		t.Fatal(err)
	}
	o := govern.Override{LimitID: "team_daily_requests", Node: "org:acme/team:infra", Amount: 30000}
	mustDo(t, func() error { _, err := owner.PutOverride(p, o, admin(t1)); return err })
	token, a, err := owner.CreateAdmin(p, "org:acme/team:infra", admin(t2))
	if err != nil {
		t.Fatal(err)
	}
	first := pull(t, owner, mirror)
	if len(first.Audit) != 4 || first.Seq != 4 {
		t.Fatalf("the first copy carries %d audit entries up to %d, want 4 up to 4", len(first.Audit), first.Seq)
	}
	sameState(t, "after the first writes", owner, mirror)
	if got, ok, err := mirror.AdminByToken(token); err != nil || !ok || got.ID != a.ID {
		t.Fatalf("the mirror does not know the delegated admin: %+v %v %v", got, ok, err)
	}
	if _, keys, _ := mirror.Keys(); len(keys) != 1 || keys[0].SHA256 != vkey.Hash(key) || keys[0].Revoked {
		t.Fatalf("the mirror's key table: %+v", keys)
	}

	mustDo(t, func() error { _, err := owner.RevokeKey(k.KID, admin(t3)); return err })
	mustDo(t, func() error { _, err := owner.DeleteOverride(o.LimitID, o.Node, admin(t3)); return err })
	second := pull(t, owner, mirror)
	if len(second.Audit) != 2 || second.Seq != 6 {
		t.Fatalf("the second copy carries %d audit entries up to %d, want the 2 new ones up to 6", len(second.Audit), second.Seq)
	}
	sameState(t, "after the revoke", owner, mirror)
	if _, keys, _ := mirror.Keys(); !keys[0].Revoked {
		t.Fatal("the revoke did not reach the mirror")
	}
	if current := pull(t, owner, mirror); len(current.Audit) != 0 || current.Seq != 6 {
		t.Fatalf("a current mirror got %d audit entries up to %d", len(current.Audit), current.Seq)
	}

	if _, err := mirror.CreateNode(p, "org:acme/team:ops", admin(t3)); !errors.Is(err, ErrMirror) {
		t.Fatalf("a write to the mirror: %v, want ErrMirror", err)
	}
	if err := mirror.RecordReload(admin(t3), ConfigReload{}, ConfigReload{}); !errors.Is(err, ErrMirror) {
		t.Fatalf("an audit entry written on the mirror: %v, want ErrMirror", err)
	}
	if err := owner.CheckMirror(); !errors.Is(err, ErrOwnPlane) || !strings.Contains(err.Error(), "(1 keys, 1 nodes and overrides, 6 audit entries)") {
		t.Fatalf("CheckMirror on the owner: %v", err)
	}
	if err := mirror.CheckMirror(); err != nil {
		t.Fatalf("CheckMirror on a mirror: %v", err)
	}
}

// TestMirrorCatchesUpInPages: a mirror far behind gets the audit log in
// pages of maxPlaneAudit, each copy complete otherwise.
func TestMirrorCatchesUpInPages(t *testing.T) {
	defer func(n int) { maxPlaneAudit = n }(maxPlaneAudit)
	maxPlaneAudit = 2
	p := seedPlan()
	owner, _ := openTemp(t)
	mirror, _ := openTemp(t)
	for _, id := range []string{"org:acme/team:a", "org:acme/team:b", "org:acme/team:c", "org:acme/team:d", "org:acme/team:e"} {
		mustDo(t, func() error { _, err := owner.CreateNode(p, id, admin(t0)); return err })
	}
	var seqs []int64
	for range 5 {
		c := pull(t, owner, mirror)
		seqs = append(seqs, c.Seq)
		if !c.More {
			break
		}
	}
	if !reflect.DeepEqual(seqs, []int64{2, 4, 5}) {
		t.Fatalf("pages ended at %v, want [2 4 5]", seqs)
	}
	sameState(t, "caught up", owner, mirror)
}

// TestMirrorRefusesABadCopy: a copy of another schema, with a row of the
// wrong width, or with audit entries out of sequence is refused whole, and
// the copy held stays.
func TestMirrorRefusesABadCopy(t *testing.T) {
	p := seedPlan()
	owner, _ := openTemp(t)
	mirror, _ := openTemp(t)
	mustDo(t, func() error { _, err := owner.CreateNode(p, "org:acme/team:a", admin(t0)); return err })
	pull(t, owner, mirror)
	mustDo(t, func() error { _, err := owner.CreateNode(p, "org:acme/team:b", admin(t1)); return err })
	good, err := owner.Plane(PlaneVersion(first(owner), 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		spoil func(*Plane)
		want  string
	}{
		{"schema", func(p *Plane) { p.Schema++ }, "run the same tokentriage release on every accountant of the fleet"},
		{"width", func(p *Plane) { p.Tables["nodes"][0] = p.Tables["nodes"][0][:2] }, "the plane copy's nodes row 0 has 2 columns, want 3"},
		{"table", func(p *Plane) { delete(p.Tables, "keys") }, "the plane copy has no keys table"},
		{"sequence", func(p *Plane) { p.Audit = append(p.Audit, p.Audit[0]) }, `the plane copy's audit entry "2" does not follow entry 2`},
		{"seq", func(p *Plane) { p.Seq = 9 }, "the plane copy ends at audit entry 2 but says 9"},
		{"id", func(p *Plane) { p.ID = "" }, "without the owner's database id"},
	} {
		b, _ := json.Marshal(good)
		var bad Plane
		json.Unmarshal(b, &bad)
		c.spoil(&bad)
		if err := mirror.ApplyPlane(bad); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if v, _ := mirror.PlaneVersion(); v != PlaneVersion(first(owner), 1) {
			t.Errorf("%s: the mirror moved to %s", c.name, v)
		}
	}
}

// first is the database id of db.
func first(db *DB) string { return db.id }

// TestPromotedMirrorOwnsItsPlane: a mirror promoted to owner keeps every
// row, carries versions of its own id (so filters reload once), and writes
// continue the audit log's sequence.
func TestPromotedMirrorOwnsItsPlane(t *testing.T) {
	p := seedPlan()
	owner, _ := openTemp(t)
	mirror, _ := openTemp(t)
	mustDo(t, func() error { _, err := owner.CreateNode(p, "org:acme/team:a", admin(t0)); return err })
	pull(t, owner, mirror)
	was, err := mirror.Promote()
	if err != nil || was != owner.id {
		t.Fatalf("Promote: %q %v, want %q", was, err, owner.id)
	}
	rv, rt, _ := mirror.Runtime()
	if !strings.HasPrefix(rv, mirror.id+".") || len(rt.Nodes) != 1 {
		t.Fatalf("after promotion: %s %+v", rv, rt)
	}
	mustDo(t, func() error { _, err := mirror.CreateNode(p, "org:acme/team:b", admin(t1)); return err })
	if got, _ := mirror.Audit(0, 0, ""); len(got) != 2 || got[1].Seq != 2 {
		t.Fatalf("audit after promotion: %+v", got)
	}
	if err := mirror.CheckMirror(); !errors.Is(err, ErrOwnPlane) {
		t.Fatalf("a promoted mirror can mirror again: %v", err)
	}
}

// TestCrossingPullsApplyOnce: a copy asked for before another one arrived
// is skipped when it is not newer, and applied without the entries already
// held when it is.
func TestCrossingPullsApplyOnce(t *testing.T) {
	p := seedPlan()
	owner, _ := openTemp(t)
	mirror, _ := openTemp(t)
	mustDo(t, func() error { _, err := owner.CreateNode(p, "org:acme/team:a", admin(t0)); return err })
	early, err := owner.Plane("") // asked for at entry 0
	if err != nil {
		t.Fatal(err)
	}
	pull(t, owner, mirror)
	if err := mirror.ApplyPlane(early); err != nil {
		t.Fatalf("a copy the mirror already holds: %v", err)
	}
	mustDo(t, func() error { _, err := owner.CreateNode(p, "org:acme/team:b", admin(t1)); return err })
	overlapping, err := owner.Plane("") // entries 1 and 2; the mirror holds 1
	if err != nil {
		t.Fatal(err)
	}
	if err := mirror.ApplyPlane(overlapping); err != nil {
		t.Fatalf("a copy overlapping the one held: %v", err)
	}
	sameState(t, "after crossing pulls", owner, mirror)
}
