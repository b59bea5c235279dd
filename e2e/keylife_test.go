package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/api"
)

// TestKeyExpiryAndRotationAtTheGateway: through `dev`, on the real clock,
// a key minted to expire is served until then and refused after, with a
// 401 naming the expiry; a rotated key's new secret is served at once and
// its old one until the grace period ends, then refused.
func TestKeyExpiryAndRotationAtTheGateway(t *testing.T) {
	ctx := testContext(t)
	s := startDev(t, writeConfig(t, nodeSDKConfig), "")
	admin := s.Admin()
	short, err := admin.Mint(ctx, api.MintRequest{Owner: "org:acme/team:ml/user:dev1", Name: "short-lived", ExpiresIn: "3s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitKey(ctx, short.Key); err != nil {
		t.Fatal(err)
	}
	if a, err := chat(ctx, s.URL(), short.Key); err != nil || a.status != http.StatusOK {
		t.Fatalf("before its expiry: %v %+v", err, a)
	}
	want := "virtual key " + short.KID + " expired at " + short.ExpiresAt.UTC().Format(time.RFC3339) + "; rotate it"
	eventually(ctx, t, "the expired key refused", func() (bool, string) {
		a, err := chat(ctx, s.URL(), short.Key)
		if err != nil {
			t.Fatal(err)
		}
		return a.status == http.StatusUnauthorized && strings.Contains(a.body, want), a.body
	})

	k, err := admin.Mint(ctx, api.MintRequest{Owner: "org:acme/team:ml/user:dev1", Name: "rotating"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := admin.RotateKey(ctx, k.KID, api.RotateRequest{Grace: "3s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitKey(ctx, r.Key); err != nil {
		t.Fatal(err)
	}
	if a, err := chat(ctx, s.URL(), k.Key); err != nil || a.status != http.StatusOK {
		t.Fatalf("the old secret within its grace period: %v %+v", err, a)
	}
	eventually(ctx, t, "the old secret refused after its grace period", func() (bool, string) {
		a, err := chat(ctx, s.URL(), k.Key)
		if err != nil {
			t.Fatal(err)
		}
		return a.status == http.StatusUnauthorized && strings.Contains(a.body, "unknown virtual key "+k.KID), a.body
	})
	if !time.Now().After(*r.PreviousUntil) {
		t.Errorf("the old secret stopped before %s", r.PreviousUntil)
	}
	if a, err := chat(ctx, s.URL(), r.Key); err != nil || a.status != http.StatusOK {
		t.Fatalf("the new secret: %v %+v", err, a)
	}
}
