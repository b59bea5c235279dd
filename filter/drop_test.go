package filter_test

import (
	"strings"
	"testing"
	"time"
)

// TestDroppedRowsAreLoudAndDistrusted: a VM whose queue to the accountant
// is full drops the next row; it says so in its log at its next tick (once
// per ten seconds, with the count), and for thirty seconds after the last
// drop its spend and quota limits are uncheckable: a fail: closed + hard
// one answers 503 naming the drops, a fail: open one admits and is listed
// as suspended. Before, the drops were silent and the closed limit kept
// admitting on counters that missed them.
func TestDroppedRowsAreLoudAndDistrusted(t *testing.T) {
	closed := `{"id":"org_budget","attach":{"level":"org"},"type":"budget_usd","amount_usd":1000,"period":"month","posture":{"mode":"on","enforce":"hard","fail":"closed"}}`
	open := `{"id":"team_budget","attach":{"level":"team"},"type":"budget_usd","amount_usd":1000,"period":"month"}`
	r := newRig(t, rigOptions{governance: gov(closed+","+open, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true, workers: 1})
	r.acct.setSnapshot("s1")
	r.sync()
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	r.wait() // its row left as it ended, and was acknowledged

	// While the clock stands still only the answer to a batch or a tick
	// would send more (sends are at least 10 ms apart): the queue fills.
	stranger := newTestKey("vk_strangerstra", "org:acme")
	for i := 0; i < 4097; i++ {
		if resp := r.do(req{path: "/v1/models", key: stranger}); resp.Status != 401 {
			t.Fatalf("filler %d: %d", i, resp.Status)
		}
	}
	if n := r.metric("tokentriage.ledger.rows_dropped"); n != 1 {
		t.Fatalf("rows_dropped = %d after 4,097 rows held, want 1", n)
	}
	drops := func() []string {
		var out []string
		for _, l := range r.h.Logs() {
			if strings.Contains(l.Message, "ledger: dropped") {
				out = append(out, l.Message)
			}
		}
		return out
	}
	if len(drops()) != 0 {
		t.Fatalf("logged before a tick: %q", drops())
	}
	r.step(time.Second) // the tick logs the drop; the queue drains
	if got := drops(); len(got) != 1 || !strings.Contains(got[0], "dropped 1 rows") {
		t.Fatalf("drop log lines %q, want one naming 1 row", got)
	}

	resp := r.chat(dev1Key, chatGermany)
	if resp.Status != 503 || !strings.Contains(string(resp.Body), "dropped ledger rows") || resp.Headers.Get("X-Tt-Refused-By") != "org_budget" {
		t.Fatalf("a fail-closed budget while rows were dropped: %d %v %s", resp.Status, resp.Headers, resp.Body)
	}
	if lim := r.meLimit(dev1Key, "team_budget"); lim["suspended"] != true {
		t.Errorf("/tt/v1/me shows team_budget %v, want suspended", lim)
	}

	// More drops within ten seconds are logged once, with their count.
	for i := 0; i < 4097; i++ {
		r.do(req{path: "/v1/models", key: stranger})
	}
	r.step(5 * time.Second)
	r.step(6 * time.Second)
	if got := drops(); len(got) != 2 || !strings.Contains(got[1], "dropped 2 rows") {
		t.Errorf("drop log lines %q, want a second naming 2 rows", got)
	}

	// Thirty seconds after the last drop the counters are trusted again.
	for i := 0; i < 4; i++ {
		r.sync()
		r.step(7 * time.Second)
	}
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
}
