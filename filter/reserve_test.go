package filter_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/wire"
	"github.com/tokentriage/tokentriage/wasmtest"
)

// gpt4o are the rates the tests' accountant publishes: $2.50 and $10 per
// million input and output tokens, in nanodollars per million.
var reservePrices = syncwire.Prices{Version: "p1", Models: map[string]syncwire.ModelRates{
	"gpt-4o": {Input: 2_500_000_000, Output: 10_000_000_000, Cached: 1_250_000_000},
}}

// reserveRig is a rig with a budget of $0.001 a day on dev1 in reserve
// mode, the prices above and an empty snapshot synced.
func reserveRig(t *testing.T, upstream ...http.Handler) *rig {
	lim := `{"id":"dev1_day","attach":{"node":"org:acme/team:ml/user:dev1"},"type":"budget_usd","amount_usd":0.001,"period":"day","reserve":true}`
	var up http.Handler
	if len(upstream) > 0 {
		up = upstream[0]
	}
	r := newRig(t, rigOptions{governance: gov(lim, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true, upstream: up,
		acct: func(a *fakeAccountant) {
			a.prices = reservePrices
			a.snapshot = syncwire.Snapshot{Version: "s0"}
		}})
	r.sync()
	return r
}

// TestReserveHoldsABurst: a burst of concurrent calls against a budget in
// reserve mode is admitted only as far as the dearest cost of each fits:
// every byte of the body an input token, its max_tokens in output. With
// $0.001 and calls of at most $0.000475 (110 body bytes, 20 output
// tokens), two are admitted while the provider holds them; settlement
// gives back what they did not use (8 prompt and 20 output tokens:
// $0.00022 each). The others are refused by what the two hold while in
// flight, not by spend, so their 429 names no reset time and no wait (the
// day's end would be false: a call fits again as soon as the two settle).
func TestReserveHoldsABurst(t *testing.T) {
	var arrived atomic.Int64
	release := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		arrived.Add(1)
		<-release
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"x","object":"chat.completion","model":"gpt-4o","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":20,"total_tokens":28}}`))
	})
	r := reserveRig(t, up)
	body := chatBody("gpt-4o", germany, `,"max_tokens":20`)
	var refused atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var refusal wasmtest.Response
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			resp := r.do(req{path: "/v1/chat/completions", key: dev1Key, vm: 1 + i%3, body: body})
			if resp.Status == 429 {
				refused.Add(1)
				mu.Lock()
				refusal = resp
				mu.Unlock()
			} else if resp.Status != 200 {
				t.Errorf("status %d: %s", resp.Status, resp.Body)
			}
		}(i)
	}
	waitFor(t, "every call to be admitted or refused", func() bool { return arrived.Load()+refused.Load() == 8 })
	dear := int64(len(body))*2500 + 20*10000
	fit := 1_000_000 / dear
	if arrived.Load() != fit {
		t.Errorf("%d calls reached the provider at once, of dearest cost %d against 1,000,000: want %d", arrived.Load(), dear, fit)
	}
	close(release)
	wg.Wait()
	wantInFlight(t, refusal, string(wire.AppendUSD(nil, fit*dear)))
	// Settled, each call cost 8×2,500 + 20×10,000 = 220,000: the rest of
	// the reserve came back.
	got := r.meLimit(dev1Key, "dev1_day")["observed_usd"].(map[string]any)["usd"].(float64)
	if want := float64(fit) * 0.00022; got < want-1e-12 || got > want+1e-12 {
		t.Errorf("observed after settlement: $%v, want $%v", got, want)
	}
	// And a call fits again.
	mustStatus(t, r.do(req{path: "/v1/chat/completions", key: dev1Key, body: body}), 200)
}

// TestReserveLowersTheOutputMaximum: a call without max_tokens, or with one
// larger than what is left affords, goes to the provider with its output
// maximum lowered to fit; when not even one output token fits it is a 429.
func TestReserveLowersTheOutputMaximum(t *testing.T) {
	r := reserveRig(t)
	max := regexp.MustCompile(`"max_completion_tokens":(\d+)`)
	sent := func() int64 {
		rec, _ := r.stub.Last()
		m := max.FindSubmatch(rec.Body)
		if m == nil {
			t.Fatalf("the provider got no max_completion_tokens: %s", rec.Body)
		}
		n, _ := strconv.ParseInt(string(m[1]), 10, 64)
		return n
	}
	body := chatBody("gpt-4o", germany) // no output maximum
	mustStatus(t, r.do(req{path: "/v1/chat/completions", key: dev1Key, body: body}), 200)
	// 1,000,000 left: (1,000,000 − bytes×2,500) / 10,000 output tokens.
	if got, want := sent(), (1_000_000-int64(len(body))*2500)/10000; got != want {
		t.Errorf("first call: max_completion_tokens %d, want %d", got, want)
	}
	// The stub answered 20 completion tokens: 8×2,500 + 20×10,000 spent.
	left := int64(1_000_000 - 220_000)
	body2 := chatBody("gpt-4o", germany, `,"max_tokens":100000`)
	mustStatus(t, r.do(req{path: "/v1/chat/completions", key: dev1Key, body: body2}), 200)
	rec, _ := r.stub.Last()
	if want := (left - int64(len(body2))*2500) / 10000; r.sentMaxTokens() != want || bytes.Contains(rec.Body, []byte("max_completion_tokens")) {
		t.Errorf("second call: %s, want max_tokens lowered to %d in place", rec.Body, want)
	}
	// Spend the rest, then nothing fits.
	for i := 0; i < 10; i++ {
		resp := r.do(req{path: "/v1/chat/completions", key: dev1Key, body: body})
		if resp.Status == 429 {
			if resp.Headers.Get("X-Tt-Refused-By") != "dev1_day" {
				t.Fatalf("refused by %q", resp.Headers.Get("X-Tt-Refused-By"))
			}
			observed := r.meLimit(dev1Key, "dev1_day")["observed_usd"].(map[string]any)["usd"].(float64)
			if observed > 0.001 {
				t.Errorf("spend passed the cap: $%v", observed)
			}
			return
		}
	}
	t.Fatal("the budget never ran out")
}

// dev1Day is an entry of the snapshot for dev1_day's counter today: the
// counter itself (suffix "") or one of its companions.
func dev1Day(suffix string, v int64) syncwire.Entry {
	return syncwire.Entry{ID: "dev1_day|budget_usd|org:acme/team:ml/user:dev1||day|" + suffix, PeriodStart: dayStart(), Value: v}
}

// sentMaxTokens is the max_tokens of the last call the provider got.
func (r *rig) sentMaxTokens() int64 {
	var doc struct {
		MaxTokens int64 `json:"max_tokens"`
	}
	rec, _ := r.stub.Last()
	json.Unmarshal(rec.Body, &doc)
	return doc.MaxTokens
}

// mustAdmitSuspended: the call went out, and its ledger row lists the
// reserve limit dev1_day as suspended (uncheckable for it, fail open).
func (r *rig) mustAdmitSuspended(resp wasmtest.Response) {
	r.t.Helper()
	mustStatus(r.t, resp, 200)
	r.step(500 * time.Millisecond)
	rows := r.acct.ledger()
	if len(rows) != 1 || len(rows[0].Suspended) != 1 || rows[0].Suspended[0] != "dev1_day" {
		r.t.Errorf("rows %s: want dev1_day suspended", jsonRows(rows))
	}
}

// TestReserveUnpricedModel: a model with no price cannot be bounded: the
// limit is uncheckable for it (admitted and listed as suspended, fail
// open).
func TestReserveUnpricedModel(t *testing.T) {
	r := reserveRig(t)
	r.mustAdmitSuspended(r.do(req{path: "/v1/chat/completions", key: dev1Key, body: chatBody("acme-llm-9", germany)}))
}

// TestReserveCountsOtherReplicas: what the snapshot shows beyond this
// replica's own folded rows is another replica's spend, and counts against
// the cap; this replica's own rows in the snapshot are not counted twice.
func TestReserveCountsOtherReplicas(t *testing.T) {
	r := reserveRig(t)
	replica, _, ok := r.h.SharedData("tt/replica")
	if !ok {
		t.Fatal("no replica name in shared data")
	}
	own := syncwire.ReplicaSuffix + string(replica) // this replica's folded rows
	body := chatBody("gpt-4o", germany, `,"max_tokens":20`)
	// 600,000 spent by another replica: 400,000 left, short of the call's
	// dearest 475,000, so it goes out with what fits: (400,000 − 110 ×
	// 2,500) / 10,000 = 12 output tokens.
	r.acct.setSnapshot("s1", dev1Day("", 600_000))
	r.sync()
	mustStatus(t, r.do(req{path: "/v1/chat/completions", key: dev1Key, body: body}), 200)
	if got, want := r.sentMaxTokens(), (400_000-int64(len(body))*2500)/10000; got != want {
		t.Fatalf("600,000 spent elsewhere: max_tokens %d, want %d", got, want)
	}
	// 990,000 spent elsewhere: not one output token fits.
	r.acct.setSnapshot("s1b", dev1Day("", 990_000))
	r.sync()
	if resp := r.do(req{path: "/v1/chat/completions", key: dev1Key, body: body}); resp.Status != 429 {
		t.Fatalf("990,000 spent elsewhere: %d, want 429", resp.Status)
	}
	// The same 600,000, folded from this replica's rows in an earlier
	// process life of the cell: not someone else's.
	// The snapshot's 990,000 is this replica's own, folded: not someone
	// else's. This replica's spend is the larger of its cell (one call of
	// 12 output tokens: 8×2,500 + 12×10,000 = 140,000) and what was folded
	// from its rows: here the folded 990,000 (a cell that started late, as
	// after a reload turned reserve on), so nothing fits.
	r.acct.setSnapshot("s2", dev1Day("", 990_000), dev1Day(own, 990_000))
	r.sync()
	if resp := r.do(req{path: "/v1/chat/completions", key: dev1Key, body: body}); resp.Status != 429 {
		t.Fatalf("990,000 folded from this replica's rows: %d, want 429", resp.Status)
	}
	// Folded 100,000 of this replica's, less than its cell's 140,000: the
	// cell counts, 860,000 is left, the call goes out as asked.
	r.acct.setSnapshot("s3", dev1Day("", 100_000), dev1Day(own, 100_000))
	r.sync()
	mustStatus(t, r.do(req{path: "/v1/chat/completions", key: dev1Key, body: body}), 200)
	if got := r.sentMaxTokens(); got != 20 {
		t.Errorf("own rows only: max_tokens %d, want the 20 asked for", got)
	}
}

// TestReserveCountsEveryChoice: a call generating n completions is bound
// at n times its output maximum, and lowered per choice to fit.
func TestReserveCountsEveryChoice(t *testing.T) {
	r := reserveRig(t)
	body := chatBody("gpt-4o", germany, `,"max_tokens":100,"n":4`)
	mustStatus(t, r.do(req{path: "/v1/chat/completions", key: dev1Key, body: body}), 200)
	// (1,000,000 − bytes×2,500) / (4 × 10,000) per choice.
	if got, want := r.sentMaxTokens(), (1_000_000-int64(len(body))*2500)/40_000; got != want {
		t.Errorf("max_tokens %d for n=4, want %d", got, want)
	}
}

// TestReserveUnpricedAfterTheCap: a call that cannot be bounded (a model
// with no price) is refused by a budget already spent, as the default
// class would refuse it.
func TestReserveUnpricedAfterTheCap(t *testing.T) {
	r := reserveRig(t)
	r.acct.setSnapshot("s1", dev1Day("", 1_000_000))
	r.sync()
	if resp := r.do(req{path: "/v1/chat/completions", key: dev1Key, body: chatBody("acme-llm-9", germany)}); resp.Status != 429 {
		t.Fatalf("an unpriced model against a spent budget: %d, want 429", resp.Status)
	}
}

// TestReserveRemoteInput: a responses call continuing a stored response
// brings input the body does not hold; its cost cannot be bounded, so the
// reserve limit is uncheckable for it (admitted, suspended).
func TestReserveRemoteInput(t *testing.T) {
	r := reserveRig(t)
	r.mustAdmitSuspended(r.do(req{path: "/v1/responses", key: dev1Key, body: `{"model":"gpt-4o","previous_response_id":"resp_1","input":"and then?","max_output_tokens":20}`}))
}

// TestReserveAfterAReset: a budget reset at the accountant is served as
// its counter less what was taken off (here all of it: 0), while the
// companion of this replica's folded rows still holds them. What the reset
// took beyond the other replicas' spend comes off this replica's own:
// the budget is whole again, and the call goes out as asked.
func TestReserveAfterAReset(t *testing.T) {
	r := reserveRig(t)
	replica, _, _ := r.h.SharedData("tt/replica")
	own := syncwire.ReplicaSuffix + string(replica)
	body := chatBody("gpt-4o", germany, `,"max_tokens":20`)
	// Before: 990,000 folded from this replica's rows; nothing fits.
	r.acct.setSnapshot("s1", dev1Day("", 990_000), dev1Day(own, 990_000))
	r.sync()
	if resp := r.do(req{path: "/v1/chat/completions", key: dev1Key, body: body}); resp.Status != 429 {
		t.Fatalf("before the reset: %d, want 429", resp.Status)
	}
	r.acct.setSnapshot("s2", dev1Day("", 0),
		dev1Day(syncwire.CreditSuffix, 990_000),
		dev1Day(own, 990_000))
	r.sync()
	mustStatus(t, r.do(req{path: "/v1/chat/completions", key: dev1Key, body: body}), 200)
	if got := r.sentMaxTokens(); got != 20 {
		t.Errorf("after the reset: max_tokens %d, want the 20 asked for", got)
	}
}
