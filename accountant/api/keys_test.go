package api

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/vkey"
)

// TestMintShowsTheKeyOnce: the key is in the mint answer and nowhere else,
// not in lists, gets, the audit log or the sync key table (which has its
// hash).
func TestMintShowsTheKeyOnce(t *testing.T) {
	f := newFixture(t, seed002)
	sc := vkey.Scopes{Models: []string{"gpt-4o*"}, Endpoints: []string{"/v1/chat/completions"}}
	var k MintedKey
	raw := f.must(http.StatusCreated, "POST", Prefix+"keys", adminToken, MintRequest{Owner: "org:acme/team:ml/user:dev1", Scopes: sc}, &k)
	kid, err := vkey.KID(k.Key)
	if err != nil || kid != k.KID {
		t.Fatalf("minted %q kid %q: KID() = %q, %v", k.Key, k.KID, kid, err)
	}
	want := `{"key":"` + k.Key + `","kid":"` + k.KID + `","owner":"org:acme/team:ml/user:dev1",` +
		`"scopes":{"models":["gpt-4o*"],"providers":null,"endpoints":["/v1/chat/completions"],"allow_passthrough":false},` +
		`"created_at":"2026-08-14T09:00:00Z","created_by":"admin","note":"` + MintNote + `"}` + "\n"
	if string(raw) != want {
		t.Fatalf("mint answer\n%s\nwant\n%s", raw, want)
	}
	if f.changed.Load() != 1 {
		t.Fatalf("Changed called %d times after one mint", f.changed.Load())
	}

	secret := k.Key[strings.LastIndexByte(k.Key, '-')+1:]
	for _, path := range []string{Prefix + "keys", Prefix + "keys/" + k.KID, Prefix + "keys?owner=org:acme", Prefix + "audit"} {
		b := f.must(http.StatusOK, "GET", path, adminToken, nil, nil)
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte(vkey.Hash(k.Key))) {
			t.Errorf("GET %s shows the key or its hash: %s", path, b)
		}
		if !bytes.Contains(b, []byte(k.KID)) {
			t.Errorf("GET %s does not name the kid: %s", path, b)
		}
	}
	_, keys, err := f.db.Keys()
	if err != nil || len(keys) != 1 || keys[0].SHA256 != vkey.Hash(k.Key) {
		t.Fatalf("sync key table %+v, %v", keys, err)
	}
	if f.changed.Load() != 1 {
		t.Fatalf("reads called Changed: %d", f.changed.Load())
	}
}

func TestMintRefusals(t *testing.T) {
	f := newFixture(t, seed002)
	f.wantError("POST", Prefix+"keys", adminToken, MintRequest{Owner: "org:acme/team:ml/user:nobody"}, http.StatusBadRequest, "invalid_request",
		`owner "org:acme/team:ml/user:nobody" is not a node of the tenancy tree; declare it in the config's tenants or create it with POST /tt/api/v1/nodes first`)
	f.wantError("POST", Prefix+"keys", adminToken, `{"owner":"org:acme","scope":{}}`, http.StatusBadRequest, "invalid_request",
		`the request body is not the JSON object this route takes: json: unknown field "scope"`)
	f.wantError("POST", Prefix+"keys", adminToken, `{"owner":"org:acme"} {}`, http.StatusBadRequest, "invalid_request",
		"the request body has data after its JSON object; send one object")
	f.wantError("POST", Prefix+"keys", adminToken, `{"owner":"org:acme","scopes":{"models":["gpt-["]}}`, http.StatusBadRequest, "invalid_request",
		`scopes.models[0]: malformed pattern "gpt-[": syntax error in pattern (patterns use Go's path.Match, where * does not cross a /)`)
	f.wantError("POST", Prefix+"keys", adminToken, MintRequest{}, http.StatusBadRequest, "invalid_request",
		"owner: "+nodeIDError(""))
	if f.changed.Load() != 0 {
		t.Fatalf("refused writes called Changed %d times", f.changed.Load())
	}
}

func TestRevokeKey(t *testing.T) {
	f := newFixture(t, seed002)
	var k MintedKey
	f.must(http.StatusCreated, "POST", Prefix+"keys", adminToken, MintRequest{Owner: "org:acme"}, &k)
	f.now = t0.Add(90 * 60e9)
	var got struct {
		KID       string  `json:"kid"`
		RevokedAt *string `json:"revoked_at"`
		RevokedBy string  `json:"revoked_by"`
	}
	f.must(http.StatusOK, "POST", Prefix+"keys/"+k.KID+"/revoke", adminToken, nil, &got)
	if got.KID != k.KID || got.RevokedAt == nil || *got.RevokedAt != "2026-08-14T10:30:00Z" || got.RevokedBy != "admin" {
		t.Fatalf("revoke answer %+v", got)
	}
	_, keys, _ := f.db.Keys()
	if len(keys) != 1 || !keys[0].Revoked {
		t.Fatalf("sync key table after revoke: %+v", keys)
	}
	f.wantError("POST", Prefix+"keys/"+k.KID+"/revoke", adminToken, nil, http.StatusConflict, "conflict",
		"key "+k.KID+" was already revoked at 2026-08-14T10:30:00Z by admin")
	f.wantError("POST", Prefix+"keys/vk_000000000000/revoke", adminToken, nil, http.StatusNotFound, "not_found",
		"no key vk_000000000000; keys list shows the minted kids")
	f.wantError("GET", Prefix+"keys/nope", adminToken, nil, http.StatusBadRequest, "invalid_request",
		`"nope" is not a kid (expected vk_ followed by 12 letters and digits)`)
	if f.changed.Load() != 2 {
		t.Fatalf("Changed called %d times; want 2 (mint, revoke)", f.changed.Load())
	}
}

// TestPassthroughIsTheAdminsToGrant: a delegated admin cannot mint a key
// with allow_passthrough (its calls reach the provider on any path, priced
// by nothing); the admin can, and the delegated admin mints the same key
// without it.
func TestPassthroughIsTheAdminsToGrant(t *testing.T) {
	f := newFixture(t, seed002)
	ml, id := f.delegate("org:acme/team:ml")
	pass := vkey.Scopes{AllowPassthrough: true}
	f.wantError("POST", Prefix+"keys", ml, MintRequest{Owner: "org:acme/team:ml/user:dev1", Scopes: pass}, http.StatusForbidden, "forbidden",
		"scopes.allow_passthrough lets a key call any provider path, priced by no limit; only the admin token may grant it, and delegated admin "+id+" (scope org:acme/team:ml) cannot: mint the key without it, or ask an admin")
	var k MintedKey
	f.must(http.StatusCreated, "POST", Prefix+"keys", ml, MintRequest{Owner: "org:acme/team:ml/user:dev1"}, &k)
	f.must(http.StatusCreated, "POST", Prefix+"keys", adminToken, MintRequest{Owner: "org:acme/team:ml/user:dev1", Scopes: pass}, &k)
	if !k.Scopes.AllowPassthrough {
		t.Fatalf("the admin's key lost allow_passthrough: %+v", k.Scopes)
	}
}

// TestKeyNameExpiryRotate: a key minted with a name and a lifetime shows
// both in its answers; a second live key of the owner cannot take the
// name; rotation answers a new key under the same kid, with when the old
// secret stops; the key's state follows the clock.
func TestKeyNameExpiryRotate(t *testing.T) {
	f := newFixture(t, seed002)
	var k MintedKey
	f.must(http.StatusCreated, "POST", Prefix+"keys", adminToken, MintRequest{Owner: "org:acme", Name: "batch jobs", ExpiresIn: "30d"}, &k)
	if k.Name != "batch jobs" || k.ExpiresAt == nil || !k.ExpiresAt.Equal(t0.AddDate(0, 0, 30)) {
		t.Fatalf("mint answer %+v", k)
	}
	f.wantError("POST", Prefix+"keys", adminToken, MintRequest{Owner: "org:acme", Name: "batch jobs"}, http.StatusConflict, "conflict",
		`owner "org:acme" already has a live key named "batch jobs" (`+k.KID+`); pick another name, or revoke `+k.KID+` first`)
	f.wantError("POST", Prefix+"keys", adminToken, MintRequest{Owner: "org:acme", ExpiresIn: "soon"}, http.StatusBadRequest, "invalid_request",
		`expires_in: "soon" is not a duration: write 30d, 2w, 12h or 90m`)
	past := t0.Add(-time.Hour)
	f.wantError("POST", Prefix+"keys", adminToken, MintRequest{Owner: "org:acme", ExpiresAt: &past, ExpiresIn: "1d"}, http.StatusBadRequest, "invalid_request",
		"send expires_at or expires_in, not both")
	var got KeyView
	f.must(http.StatusOK, "GET", Prefix+"keys/"+k.KID, adminToken, nil, &got)
	if got.Name != "batch jobs" || got.State != "live" {
		t.Fatalf("GET key %+v", got)
	}

	f.now = t0.Add(time.Hour)
	var rot RotatedKey
	f.must(http.StatusOK, "POST", Prefix+"keys/"+k.KID+"/rotate", adminToken, `{"grace":"2h"}`, &rot)
	if kid, _ := vkey.KID(rot.Key); kid != k.KID || rot.Key == k.Key || rot.PreviousUntil == nil || !rot.PreviousUntil.Equal(t0.Add(3*time.Hour)) ||
		rot.Note != RotateNote || rot.Name != "batch jobs" || rot.State != "live" {
		t.Fatalf("rotate answer %+v", rot)
	}
	_, keys, _ := f.db.Keys()
	if keys[0].SHA256 != vkey.Hash(rot.Key) || keys[0].PrevSHA256 != vkey.Hash(k.Key) || keys[0].PrevUntil != t0.Add(3*time.Hour).Unix() ||
		keys[0].ExpiresAt != t0.AddDate(0, 0, 30).Unix() || keys[0].Name != "batch jobs" {
		t.Fatalf("sync table after the rotation %+v", keys[0])
	}
	// An empty body rotates with the default grace.
	f.must(http.StatusOK, "POST", Prefix+"keys/"+k.KID+"/rotate", adminToken, nil, &rot)
	if !rot.PreviousUntil.Equal(f.now.Add(24 * time.Hour)) {
		t.Fatalf("default grace: previous secret until %v", rot.PreviousUntil)
	}
	f.wantError("POST", Prefix+"keys/"+k.KID+"/rotate", adminToken, `{"grace":"-1h"}`, http.StatusBadRequest, "invalid_request", `grace: "-1h" is negative`)

	f.now = t0.AddDate(0, 0, 31)
	var list KeyList
	f.must(http.StatusOK, "GET", Prefix+"keys", adminToken, nil, &list)
	if len(list.Keys) != 1 || list.Keys[0].State != "expired" {
		t.Fatalf("list after the expiry: %+v", list)
	}
	f.must(http.StatusOK, "POST", Prefix+"keys/"+k.KID+"/rotate", adminToken, `{"expires_in":"never"}`, &rot)
	if rot.ExpiresAt != nil || rot.State != "live" {
		t.Fatalf("rotated with no expiry: %+v", rot)
	}
	entries, _ := f.db.Audit(0, 0, "")
	var actions []string
	for _, e := range entries {
		actions = append(actions, e.Who+" "+e.Action)
	}
	if strings.Join(actions, ",") != "admin key.mint,admin key.rotate,admin key.rotate,admin key.rotate" {
		t.Fatalf("audit %v", actions)
	}
}

func TestParseLifetime(t *testing.T) {
	for in, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "2w": 14 * 24 * time.Hour, "90m": 90 * time.Minute, "0s": 0, "1h30m": 90 * time.Minute} {
		if got, err := ParseLifetime(in); err != nil || got != want {
			t.Errorf("ParseLifetime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "30", "-2d", "1dw", "99999d", "3y"} {
		if _, err := ParseLifetime(in); err == nil {
			t.Errorf("ParseLifetime(%q) took it", in)
		}
	}
}
