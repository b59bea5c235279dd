package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// TestMintWithOverrides: POST keys sets the key's own overrides of
// key-level templates with it, answers them as GET overrides shows them,
// and the armed plan holds them at the key's node; an amount in the wrong
// shape, above the ceiling or of a limit that is not key-level refuses
// the mint whole.
func TestMintWithOverrides(t *testing.T) {
	f := newFixture(t, "testdata/keylevel.yaml")
	twenty, n := config.USD{Nanos: 20_000_000_000}, int64(5000)
	var k MintedKey
	f.must(http.StatusCreated, "POST", Prefix+"keys", adminToken, MintRequest{Owner: "org:acme/team:ml/user:dev1",
		Overrides: []KeyOverride{{LimitID: "key_day", AmountUSD: &twenty}, {LimitID: "key_requests", Amount: &n}}}, &k)
	leaf := govern.KeyLeaf("org:acme/team:ml/user:dev1", k.KID)
	if len(k.Overrides) != 2 || k.Overrides[0].Node != leaf || k.Overrides[0].Amount == nil || k.Overrides[0].Amount.USD != "20" ||
		k.Overrides[1].AmountCount == nil || *k.Overrides[1].AmountCount != 5000 || k.Overrides[0].State != StateArmed {
		t.Fatalf("mint answer overrides %+v", k.Overrides)
	}
	if got, ok := f.armed.Load().Override("key_day", leaf); !ok || got != 20_000_000_000 {
		t.Errorf("armed override %d %v", got, ok)
	}
	b := f.must(http.StatusOK, "GET", Prefix+"overrides?node="+leaf, adminToken, nil, nil)
	if !strings.Contains(string(b), `"node":"`+leaf+`"`) || !strings.Contains(string(b), `"state":"in_force"`) {
		t.Errorf("GET overrides?node=%s: %s", leaf, b)
	}

	over := config.USD{Nanos: 51_000_000_000}
	for _, c := range []struct {
		body    any
		message string
	}{
		{MintRequest{Owner: "org:acme", Overrides: []KeyOverride{{LimitID: "key_day", Amount: &n}}},
			`overrides[0]: limit "key_day" is budget_usd: send amount_usd in dollars (for example 2500 or 0.5), not amount`},
		{MintRequest{Owner: "org:acme", Overrides: []KeyOverride{{LimitID: "key_day", AmountUSD: &over}}},
			`override amount $51 of limit "key_day" exceeds its ceiling $50 (override.max_amount_usd); raise the ceiling in the config first`},
		{MintRequest{Owner: "org:acme", Overrides: []KeyOverride{{LimitID: "key_rpm", Amount: &n}}},
			govern.OverrideRefusal(govern.RPM)},
	} {
		f.wantError("POST", Prefix+"keys", adminToken, c.body, http.StatusBadRequest, "invalid_request", c.message)
	}
	var list KeyList
	f.must(http.StatusOK, "GET", Prefix+"keys", adminToken, nil, &list)
	if len(list.Keys) != 1 {
		t.Errorf("a refused mint left a key: %+v", list.Keys)
	}

	// PUT and DELETE overrides take a key's node too.
	f.must(http.StatusOK, "PUT", Prefix+"overrides", adminToken, OverrideRequest{LimitID: "key_requests", Node: leaf, Amount: &n}, nil)
	f.wantError("PUT", Prefix+"overrides", adminToken, OverrideRequest{LimitID: "key_requests", Node: "org:acme/key:vk_x", Amount: &n},
		http.StatusBadRequest, "invalid_request", `node: key node "org:acme/key:vk_x": "vk_x" is not a kid (vk_ followed by 12 letters and digits)`)
	f.must(http.StatusOK, "DELETE", Prefix+"overrides?limit_id=key_requests&node="+leaf, adminToken, nil, nil)
}
