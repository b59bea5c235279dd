package runtime

import (
	"testing"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// keyPlan is seedPlan with key-level templates: a daily budget a key may
// have raised to $50, a request quota with no ceiling, a key rpm.
func keyPlan() fakePlan {
	p := seedPlan()
	for _, l := range []*govern.Limit{
		{ID: "key_day", Type: govern.BudgetUSD, Level: govern.LevelKey, Amount: 5 * usd, OverrideAllow: true, OverrideMax: 50 * usd},
		{ID: "key_requests", Type: govern.QuotaRequests, Level: govern.LevelKey, Amount: 100, OverrideAllow: true, OverrideMax: -1},
		{ID: "key_fixed", Type: govern.QuotaTokens, Level: govern.LevelKey, Amount: 100, OverrideMax: -1},
		{ID: "key_rpm", Type: govern.RPM, Level: govern.LevelKey, Amount: 10, OverrideMax: -1},
	} {
		p.limits[l.ID] = l
	}
	return p
}

// TestMintWithOverrides: a key minted with its own overrides of key-level
// templates gets them at its node, in the same write, each audited after
// the mint; one the rules refuse refuses the whole mint.
func TestMintWithOverrides(t *testing.T) {
	p := keyPlan()
	db, _ := openTemp(t)
	const dev1 = "org:acme/team:ml/user:dev1"
	_, k, set, err := db.MintKeyWithOverrides(p, dev1, vkey.Scopes{}, []govern.Override{
		{LimitID: "key_day", Amount: 20 * usd}, {LimitID: "key_requests", Amount: 5000}}, admin(t0))
	if err != nil {
		t.Fatal(err)
	}
	leaf := govern.KeyLeaf(dev1, k.KID)
	if len(set) != 2 || set[0].Node != leaf || set[0].Amount != 20*usd || set[1].Node != leaf || set[1].Amount != 5000 {
		t.Fatalf("overrides set %+v", set)
	}
	_, rt, err := db.Runtime()
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.Overrides) != 2 || rt.Overrides[0] != (govern.Override{LimitID: "key_day", Node: leaf, Amount: 20 * usd}) {
		t.Errorf("runtime overrides %+v", rt.Overrides)
	}
	audit, err := db.Audit(0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, a := range audit {
		actions = append(actions, a.Action+" "+a.Target)
	}
	want := []string{ActionKeyMint + " " + k.KID, ActionOverridePut + " key_day@" + leaf, ActionOverridePut + " key_requests@" + leaf}
	if len(actions) != 3 || actions[0] != want[0] || actions[1] != want[1] || actions[2] != want[2] {
		t.Errorf("audit %v, want %v", actions, want)
	}

	for i, c := range []struct {
		o      govern.Override
		kind   Kind
		reason string
	}{
		{govern.Override{LimitID: "key_day", Amount: 51 * usd}, Invalid, `override amount $51 of limit "key_day" exceeds its ceiling $50 (override.max_amount_usd); raise the ceiling in the config first`},
		{govern.Override{LimitID: "key_fixed", Amount: 5}, Invalid, `limit "key_fixed" does not allow per-node overrides; set override: { allow: true } on it in the config and reload`},
		{govern.Override{LimitID: "key_rpm", Amount: 5}, Invalid, govern.OverrideRefusal(govern.RPM)},
		{govern.Override{LimitID: "team_daily_requests", Amount: 5}, Invalid, `limit "team_daily_requests" is not a key-level template (attach: { level: key }), so a key has no instance of it to override; set a node's override with PUT /tt/api/v1/overrides`},
		{govern.Override{LimitID: "nope", Amount: 5}, NotFound, `limit "nope" is not armed; GET /tt/api/v1/governance/limits lists the armed limit ids`},
		{govern.Override{LimitID: "key_day", Amount: 0}, Invalid, `override amount $0 of limit "key_day" must be greater than zero (zero or less would switch the cap off rather than lower it); delete the override to return to the template's amount`},
	} {
		_, _, _, err := db.MintKeyWithOverrides(p, dev1, vkey.Scopes{}, []govern.Override{{LimitID: "key_requests", Amount: 7}, c.o}, admin(t1))
		if err == nil {
			t.Errorf("step %d: minted with %+v", i, c.o)
			continue
		}
		wantRefusal(t, err, c.kind, c.reason)
	}
	keys, err := db.ListKeys("")
	if err != nil || len(keys) != 1 {
		t.Errorf("a refused mint left a key: %d keys, %v", len(keys), err)
	}
}

// TestKeyOverrideNodes: an override of a key-level template is at the node
// of a live key, owned by that node's owner.
func TestKeyOverrideNodes(t *testing.T) {
	p := keyPlan()
	db, _ := openTemp(t)
	const dev1, dev2 = "org:acme/team:ml/user:dev1", "org:acme/team:ml/user:dev2"
	_, k, err := db.MintKey(p, dev1, vkey.Scopes{}, admin(t0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutOverride(p, govern.Override{LimitID: "key_day", Node: govern.KeyLeaf(dev1, k.KID), Amount: 7 * usd}, admin(t1)); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		limit, node string
		reason      string
	}{
		{"key_day", govern.KeyLeaf(dev2, k.KID), `node "` + govern.KeyLeaf(dev2, k.KID) + `" is not the node of a live key: no key with that kid is owned by that node, or it was revoked; keys list shows the keys and their owners`},
		{"key_day", govern.KeyLeaf(dev1, "vk_000000000000"), `node "` + govern.KeyLeaf(dev1, "vk_000000000000") + `" is not the node of a live key: no key with that kid is owned by that node, or it was revoked; keys list shows the keys and their owners`},
		{"key_day", dev1, `limit "key_day" is a template at level "key" and has no instance at the user node "` + dev1 + `"; name a key's node, <owner>/key:<kid> (keys list shows the kids)`},
		{"team_daily_requests", govern.KeyLeaf(dev1, k.KID), `limit "team_daily_requests" is a template at level "team" and has no instance at the key node "` + govern.KeyLeaf(dev1, k.KID) + `"; name a team node`},
		{"key_day", dev1 + "/key:vk_bad", `node "` + dev1 + `/key:vk_bad" is not a valid key node: key node "` + dev1 + `/key:vk_bad": "vk_bad" is not a kid (vk_ followed by 12 letters and digits)`},
	} {
		_, err := db.PutOverride(p, govern.Override{LimitID: c.limit, Node: c.node, Amount: 7}, admin(t1))
		if err == nil {
			t.Errorf("step %d: put %s@%s", i, c.limit, c.node)
			continue
		}
		wantRefusal(t, err, Invalid, c.reason)
	}
	if _, err := db.RevokeKey(k.KID, admin(t2)); err != nil {
		t.Fatal(err)
	}
	_, err = db.PutOverride(p, govern.Override{LimitID: "key_day", Node: govern.KeyLeaf(dev1, k.KID), Amount: 8 * usd}, admin(t3))
	wantRefusal(t, err, Invalid, `node "`+govern.KeyLeaf(dev1, k.KID)+`" is not the node of a live key: no key with that kid is owned by that node, or it was revoked; keys list shows the keys and their owners`)
	if _, err := db.DeleteOverride("key_day", govern.KeyLeaf(dev1, k.KID), admin(t3)); err != nil {
		t.Errorf("deleting a revoked key's override: %v", err)
	}
}
