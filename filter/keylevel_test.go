package filter_test

import (
	"encoding/json"
	"testing"

	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// TestKeyLevelLimits: attach: { level: key } gives each virtual key its own
// instance at <owner>/key:<kid>, the deepest node of its chain: two keys of
// one user have separate counters, the 429 names the key's node, and
// /tt/v1/me lists the key's rows. A key-level budget reads the key's own
// counter from the snapshot, with the key's own override applied.
func TestKeyLevelLimits(t *testing.T) {
	other := newTestKey("vk_dev1second00", dev1Key.owner)
	lims := `{"id":"key_rpm","attach":{"level":"key"},"type":"rpm","amount":2,"period":"1m"},
		{"id":"key_day","attach":{"level":"key"},"type":"budget_usd","amount_usd":1,"period":"day","override":{"allow":true,"max_amount_usd":10}}`
	leaf := dev1Key.owner + "/key:" + dev1Key.kid
	otherLeaf := other.owner + "/key:" + other.kid
	r := newRig(t, rigOptions{governance: gov(lims, `,"require_key":true`), keys: []testKey{dev1Key, other}, accountant: true,
		acct: func(a *fakeAccountant) {
			a.setSnapshot("s1",
				syncwire.Entry{ID: "key_day|budget_usd|" + leaf + "||day|", PeriodStart: dayStart(), Value: 2_000_000_000},
				syncwire.Entry{ID: "key_day|budget_usd|" + otherLeaf + "||day|", PeriodStart: dayStart(), Value: 2_000_000_000})
			a.setRuntime("rt1", nil, syncwire.Override{LimitID: "key_day", Node: leaf, Amount: 5_000_000_000})
		}})
	r.sync()
	// dev1's first key has $5 (its override) and spent $2; the second has
	// the template's $1 and spent $2.
	for i := 0; i < 2; i++ {
		mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	}
	resp := r.chat(other, chatGermany)
	mustStatus(t, resp, 429)
	refusedBy := func(resp []byte) (limit, node string) {
		var b struct {
			Error struct {
				RefusedBy struct {
					LimitID string `json:"limit_id"`
					Node    string `json:"node"`
				} `json:"refused_by"`
			} `json:"error"`
		}
		json.Unmarshal(resp, &b)
		return b.Error.RefusedBy.LimitID, b.Error.RefusedBy.Node
	}
	if l, n := refusedBy(resp.Body); l != "key_day" || n != otherLeaf {
		t.Errorf("the second key: refused by %s at %s, want key_day at %s", l, n, otherLeaf)
	}
	// The first key's rpm is spent; the second's is its own, one used by
	// the refused request (gate 1 counts it).
	resp = r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 429)
	if l, n := refusedBy(resp.Body); l != "key_rpm" || n != leaf {
		t.Errorf("the first key: refused by %s at %s, want key_rpm at %s", l, n, leaf)
	}
	if row := r.meLimit(other, "key_rpm"); row["node"] != otherLeaf || row["observed"] != 1.0 {
		t.Errorf("the second key's rpm row: %v", row)
	}
	if row := r.meLimit(dev1Key, "key_day"); row["node"] != leaf || row["limit_usd"].(map[string]any)["usd"] != 5.0 {
		t.Errorf("the first key's budget row: %v", row)
	}
}
