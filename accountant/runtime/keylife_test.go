package runtime

import (
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/vkey"
)

// TestKeyNamesAndLifetimes: a name is unique among an owner's live keys
// (free again once its key is revoked, and free under another owner); an
// expiry must lie ahead; the sync table carries name and expiry in Unix
// seconds.
func TestKeyNamesAndLifetimes(t *testing.T) {
	p := seedPlan()
	db, _ := openTemp(t)
	dev1 := "org:acme/team:ml/user:dev1"
	exp := t0.Add(30 * 24 * time.Hour)
	_, k, _, err := db.Mint(p, KeySpec{Owner: dev1, Name: "ci-bot", ExpiresAt: exp.Add(123 * time.Millisecond)}, admin(t0))
	if err != nil {
		t.Fatal(err)
	}
	if k.Name != "ci-bot" || k.ExpiresAt == nil || !k.ExpiresAt.Equal(exp) || k.State(t0) != "live" || k.State(exp) != "expired" {
		t.Fatalf("minted %+v", k)
	}
	_, _, _, err = db.Mint(p, KeySpec{Owner: dev1, Name: "ci-bot"}, admin(t1))
	wantRefusal(t, err, Conflict, `owner "org:acme/team:ml/user:dev1" already has a live key named "ci-bot" (`+k.KID+`); pick another name, or revoke `+k.KID+` first`)
	if _, _, _, err := db.Mint(p, KeySpec{Owner: "org:acme/team:ml/user:dev2", Name: "ci-bot"}, admin(t1)); err != nil {
		t.Fatalf("the same name under another owner: %v", err)
	}
	_, _, _, err = db.Mint(p, KeySpec{Owner: dev1, ExpiresAt: t0}, admin(t1))
	wantRefusal(t, err, Invalid, "expires_at 2026-08-14T09:00:00Z is not in the future (it is now 2026-08-14T09:01:00Z); give a later time, or none for a key that never expires")
	for name, reason := range map[string]string{
		" pad":                   `name " pad" starts or ends with a space; send it without`,
		"tab\there":              `name "tab\there" holds a control character; use letters, digits, spaces and punctuation`,
		string(make([]byte, 65)): "",
	} {
		_, _, _, err := db.Mint(p, KeySpec{Owner: dev1, Name: name}, admin(t1))
		if reason == "" {
			if err == nil {
				t.Errorf("a 65-byte name was taken")
			}
			continue
		}
		wantRefusal(t, err, Invalid, reason)
	}
	_, keys, _ := db.Keys()
	var sk *struct {
		name string
		exp  int64
	}
	for _, x := range keys {
		if x.KID == k.KID {
			sk = &struct {
				name string
				exp  int64
			}{x.Name, x.ExpiresAt}
		}
	}
	if sk == nil || sk.name != "ci-bot" || sk.exp != exp.Unix() {
		t.Fatalf("sync entry of %s: %+v", k.KID, sk)
	}
	if _, err := db.RevokeKey(k.KID, admin(t1)); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := db.Mint(p, KeySpec{Owner: dev1, Name: "ci-bot"}, admin(t2)); err != nil {
		t.Fatalf("the name of a revoked key: %v", err)
	}
}

// TestRotateKey: rotation gives a new secret under the same kid; the
// sync table carries the previous hash until the end of the grace period;
// a second rotation drops the first secret at once; an expired key
// rotates only with a new expiry; a revoked key does not rotate.
func TestRotateKey(t *testing.T) {
	p := seedPlan()
	db, _ := openTemp(t)
	key, k, _, err := db.Mint(p, KeySpec{Owner: "org:acme", Name: "svc", ExpiresAt: t0.Add(time.Hour)}, admin(t0))
	if err != nil {
		t.Fatal(err)
	}
	v0, _, _ := db.Keys()
	key2, k2, err := db.RotateKey(k.KID, DefaultRotationGrace, nil, Stamp{Who: "adm_1", At: t1})
	if err != nil {
		t.Fatal(err)
	}
	if kid, _ := vkey.KID(key2); kid != k.KID || key2 == key {
		t.Fatalf("rotated key %q of %s", key2, k.KID)
	}
	if k2.RotatedAt == nil || !k2.RotatedAt.Equal(t1) || k2.RotatedBy != "adm_1" || k2.PreviousUntil == nil || !k2.PreviousUntil.Equal(t1.Add(24*time.Hour)) ||
		k2.ExpiresAt == nil || !k2.ExpiresAt.Equal(t0.Add(time.Hour)) || k2.Name != "svc" {
		t.Fatalf("rotated %+v", k2)
	}
	v1, keys, _ := db.Keys()
	if v1 == v0 || keys[0].SHA256 != vkey.Hash(key2) || keys[0].PrevSHA256 != vkey.Hash(key) || keys[0].PrevUntil != t1.Add(24*time.Hour).Unix() {
		t.Fatalf("after rotation: version %s→%s, %+v", v0, v1, keys[0])
	}
	if got, _ := db.Key(k.KID); !jsonEqual(got, k2) {
		t.Fatalf("Key() = %+v", got)
	}
	// Again, with no grace: no previous secret at all.
	key3, _, err := db.RotateKey(k.KID, 0, nil, admin(t2))
	if err != nil {
		t.Fatal(err)
	}
	_, keys, _ = db.Keys()
	if keys[0].SHA256 != vkey.Hash(key3) || keys[0].PrevSHA256 != "" || keys[0].PrevUntil != 0 {
		t.Fatalf("rotated with no grace: %+v", keys[0])
	}
	_, _, err = db.RotateKey(k.KID, 8*24*time.Hour, nil, admin(t2))
	wantRefusal(t, err, Invalid, "grace 192h0m0s is out of range; the previous secret may stay valid from 0 to 168h0m0s (default 24h0m0s)")
	// Expired: only with a new expiry.
	late := t0.Add(2 * time.Hour)
	_, _, err = db.RotateKey(k.KID, time.Hour, nil, admin(late))
	wantRefusal(t, err, Invalid, "key "+k.KID+" expired at 2026-08-14T10:00:00Z; give the rotated key a new expiry (expires_at or expires_in, or --expires), or none to never expire")
	never := time.Time{}
	if _, k4, err := db.RotateKey(k.KID, time.Hour, &never, admin(late)); err != nil || k4.ExpiresAt != nil || k4.State(late) != "live" {
		t.Fatalf("rotated with no expiry: %+v, %v", k4, err)
	}
	if _, err := db.RevokeKey(k.KID, admin(late)); err != nil {
		t.Fatal(err)
	}
	_, _, err = db.RotateKey(k.KID, time.Hour, nil, admin(late))
	wantRefusal(t, err, Conflict, "key "+k.KID+" was revoked at 2026-08-14T11:00:00Z by admin; a revoked key stays revoked: mint a new one")
	entries, _ := db.Audit(0, 0, "")
	rotations := 0
	for _, e := range entries {
		if e.Action == ActionKeyRotate {
			rotations++
		}
	}
	if rotations != 3 {
		t.Fatalf("%d key.rotate audit entries, want 3", rotations)
	}
}
