package filter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/wasmtest"
)

func wantInFlight(t *testing.T, resp wasmtest.Response, usd string) {
	t.Helper()
	b := string(resp.Body)
	h := resp.Headers
	if resp.Status != 429 || h.Get("Retry-After") != "" || h.Get("Retry-After-Ms") != "" || h.Get("Ratelimit") != "" || h.Get("X-Should-Retry") != "false" ||
		strings.Contains(b, "resets_at") || strings.Contains(b, "retry_after_s") || !strings.Contains(b, `"in_flight":`+usd+`}`) ||
		!strings.Contains(b, "held by calls in flight") {
		t.Errorf("a refusal by what calls in flight hold: %d %v %s; want no reset time or wait, X-Should-Retry false, in_flight %s", resp.Status, h, b, usd)
	}
}

const fleetShared = `,"shared_state":{"redis":{"addr":"127.0.0.1:1"}},"require_key":true`

// leaseRig is a rig whose accountant leases from an in-memory Redis.
func leaseRig(t *testing.T, lims string, opts ...func(*rigOptions)) (*rig, *memLeases) {
	t.Helper()
	var m *memLeases
	o := rigOptions{governance: gov(lims, fleetShared), keys: []testKey{dev1Key}, accountant: true,
		acct: func(a *fakeAccountant) {
			m = newMemLeases(a.clock)
			a.redis = true
			a.lease = m.serve
			a.prices = reservePrices
			a.snapshot = syncwire.Snapshot{Version: "s0"}
		}}
	for _, f := range opts {
		f(&o)
	}
	r := newRig(t, o)
	r.sync()
	return r, m
}

// TestLeaseRPM: a store: redis rpm limit is decided on the replica's lease:
// the fleet admits exactly its amount, the first request waits for a lease
// and the next ones draw on it with no call of their own, none says
// suspended, and the refusal carries the fleet's wait.
func TestLeaseRPM(t *testing.T) {
	for _, alg := range []string{"gcra", "fixed_window", "sliding_window"} {
		t.Run(alg, func(t *testing.T) {
			lims := `{"id":"fleet_rpm","attach":{"node":"org:acme"},"type":"rpm","amount":20,"period":"1h","algorithm":"` + alg + `","store":"redis"}`
			r, _ := leaseRig(t, lims)
			body := chatBody("gpt-4o-mini", "hi")
			_, before := r.acct.leaseCalls()
			admitted := 0
			for i := 0; i < 30; i++ {
				resp := r.chat(dev1Key, body)
				if s := resp.Headers.Get("X-Tt-Suspended"); s != "" {
					t.Fatalf("request %d said suspended %q", i, s)
				}
				switch resp.Status {
				case 200:
					admitted++
				case 429:
					if resp.Headers.Get("X-Tt-Refused-By") != "fleet_rpm" || resp.Headers.Get("Retry-After") == "" {
						t.Fatalf("request %d refused: %v %s", i, resp.Headers, resp.Body)
					}
				default:
					t.Fatalf("request %d: %d %s", i, resp.Status, resp.Body)
				}
			}
			if admitted != 20 {
				t.Fatalf("%d of 30 admitted; want the fleet's 20", admitted)
			}
			if _, asks := r.acct.leaseCalls(); asks-before > 20 {
				t.Errorf("%d lease calls asked for units for 30 requests; want most requests to draw on the lease", asks-before)
			}
		})
	}
}

// TestLeaseRPMSteadyState: a request of a store: redis rpm limit far from
// its amount adds no call to the accountant (nor a Redis operation): the
// replica's lot, refilled ahead of need, decides; the calls are a small
// fraction of the requests.
func TestLeaseRPMSteadyState(t *testing.T) {
	asks, waited := steadyLeaseCalls(t, `{"id":"fleet_rpm","attach":{"node":"org:acme"},"type":"rpm","amount":100000,"period":"1m","store":"redis"}`)
	if asks > 20 || waited > 2 {
		t.Fatalf("%d calls asked for units for 200 requests, %d of them with a request waiting; want at most one in ten, and a wait only for the first", asks, waited)
	}
}

// TestLeaseSpendSteadyState: a reserve-mode quota far from its amount on
// the fleet's Redis: its lease grows with the replica's demand (about a
// second of what its calls settle), so the calls to the accountant are a
// small fraction of the requests, even where each call settles all it
// held (quota_requests: one).
func TestLeaseSpendSteadyState(t *testing.T) {
	asks, waited := steadyLeaseCalls(t, `{"id":"dev1_calls","attach":{"node":"org:acme/team:ml/user:dev1"},"type":"quota_requests","amount":1000000,"period":"day","reserve":true}`)
	// Before the lease followed the demand it was one call's worth ahead:
	// 192 calls for 200 requests, 100 with a request waiting.
	if asks > 20 || waited > 5 {
		t.Fatalf("%d calls asked for a lease for 200 requests, %d of them with a request waiting; want at most one in ten, and a wait only while the lease learns the demand (a few)", asks, waited)
	}
}

// steadyLeaseCalls sends 200 requests, 200 a second as the host's clock
// sees them, under the fleet limit lims far from its amount, each admitted
// and none suspended, and returns how many lease calls asked for
// something and how many had a request waiting.
func steadyLeaseCalls(t *testing.T, lims string) (asks, waited int) {
	t.Helper()
	r, _ := leaseRig(t, lims)
	body := chatBody("gpt-4o-mini", "hi")
	_, before := r.acct.leaseCalls()
	for i := 0; i < 200; i++ {
		if resp := r.chat(dev1Key, body); resp.Status != 200 || resp.Headers.Get("X-Tt-Suspended") != "" {
			t.Fatalf("request %d: %d %v", i, resp.Status, resp.Headers)
		}
		if i%10 == 9 {
			r.step(50 * time.Millisecond)
		}
	}
	calls, asks := r.acct.leaseCalls()
	for _, c := range calls {
		if c.Wait {
			waited++
		}
	}
	return asks - before, waited
}

// TestLeaseRPMDown: with Redis not deciding, a fail: closed hard limit
// answers 503 past its lease; an open one admits within the replica's
// share (the amount over the fleet's replicas, rounded up) and every
// answer, admitted or refused, says suspended.
func TestLeaseRPMDown(t *testing.T) {
	lims := `{"id":"open_rpm","attach":{"node":"org:acme"},"type":"rpm","amount":10,"period":"1h","store":"redis"},` +
		`{"id":"closed_rpm","attach":{"node":"org:acme/team:search"},"type":"rpm","amount":10,"period":"1h","store":"redis","posture":{"fail":"closed"}}`
	r, m := leaseRig(t, lims, func(o *rigOptions) { o.keys = append(o.keys, searchKey) })
	r.acct.set(func(*fakeAccountant) { m.down, m.replicas = "the shared Redis did not decide: redis is down", 3 })
	body := chatBody("gpt-4o-mini", "hi")
	resp := r.chat(searchKey, body)
	if resp.Status != 503 || !strings.Contains(string(resp.Body), "redis is down") {
		t.Fatalf("fail: closed with Redis down: %d %s", resp.Status, resp.Body)
	}
	for i, want := range []int{200, 200, 200, 200, 429} {
		resp := r.chat(dev1Key, body)
		if resp.Status != want || resp.Headers.Get("X-Tt-Suspended") != "open_rpm" {
			t.Fatalf("request %d with Redis down: %d suspended %q; want %d (the share: ceil(10/3) = 4), saying suspended", i, resp.Status, resp.Headers.Get("X-Tt-Suspended"), want)
		}
	}
	m2 := r.meLimit(dev1Key, "open_rpm")
	if m2["suspended"] != true || m2["amount"] != float64(4) {
		t.Errorf("/tt/v1/me with Redis down: %v; want suspended, amount 4 (the share)", m2)
	}
	// Redis back: the next call decides on the fleet again.
	r.acct.set(func(*fakeAccountant) { m.down = "" })
	r.step(3 * time.Second) // a renewal, or a request's call, finds it back
	deadline := time.Now().Add(time.Minute)
	for {
		resp := r.chat(dev1Key, body)
		if resp.Headers.Get("X-Tt-Suspended") == "" && resp.Status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis back, still deciding alone: %d %v", resp.Status, resp.Headers)
		}
		r.step(time.Second)
	}
}

// TestLeaseRPMDeadline: a lease call whose Redis operation missed its
// deadline goes again under the same ask (Redis answers it with what it
// granted, if it did); a call the accountant does not answer is given what
// the waiting request may still wait (shared_state.redis.timeout and a
// second) and the hop's allowance, on the host's clock; past that the
// request is decided within the replica's share, and says suspended.
func TestLeaseRPMDeadline(t *testing.T) {
	lims := `{"id":"fleet_rpm","attach":{"node":"org:acme"},"type":"rpm","amount":5,"period":"1m","store":"redis"}`
	shared := `,"shared_state":{"redis":{"addr":"127.0.0.1:1","timeout":"5ms"}},"require_key":true`
	asked := make(chan string, 64)
	release := make(chan struct{})
	calls := 0
	r := newRig(t, rigOptions{governance: gov(lims, shared), keys: []testKey{dev1Key}, accountant: true,
		acct: func(a *fakeAccountant) {
			a.lease = func(req syncwire.LeaseRequest) syncwire.LeaseAnswer {
				calls++
				if calls == 1 {
					asked <- req.Leases[0].Ask
					return syncwire.LeaseAnswer{Suspended: "the shared Redis did not decide: redis did not answer within the deadline (5ms)"}
				}
				a.mu.Unlock() // let the test see the rig while this waits
				defer a.mu.Lock()
				asked <- req.Leases[0].Ask
				<-release // answers only after the deadline passed
				return syncwire.LeaseAnswer{Suspended: "late"}
			}
		}})
	done := make(chan wasmtest.Response, 1)
	go func() { done <- r.chat(dev1Key, chatBody("gpt-4o-mini", "hi")) }()
	first := <-asked
	if again := <-asked; again != first {
		t.Fatalf("the call past its Redis deadline went again as ask %q; want the same ask %q", again, first)
	}
	r.clock.Advance(30 * time.Millisecond)
	select {
	case resp := <-done:
		t.Fatalf("answered at 30 ms, with a second of its wait left: %d, X-Tt-Suspended %q", resp.Status, resp.Headers.Get("X-Tt-Suspended"))
	case <-time.After(100 * time.Millisecond):
	}
	r.clock.Advance(time.Second) // the rest of the wait, and the hop's allowance: the callout times out, a 504
	resp := <-done
	close(release)
	if resp.Status != 200 || resp.Headers.Get("X-Tt-Suspended") != "fleet_rpm" {
		t.Fatalf("past the wait: %d, X-Tt-Suspended %q; want 200 within the share, saying suspended", resp.Status, resp.Headers.Get("X-Tt-Suspended"))
	}
	said := false
	for _, l := range r.h.Logs() {
		said = said || strings.Contains(l.Message, "requests waiting for a lease of fleet_rpm")
	}
	if !said {
		t.Errorf("no log line about the requests decided within the share; the log: %v", r.h.Logs())
	}
}

// TestLeaseTPM: a store: redis tpm reserve comes from the replica's lot and
// its reconcile goes back into the lot (no row reconcile while the lot is
// the replica's); the fleet refuses a second reserve that does not fit,
// and the first one's unused tokens make room again.
func TestLeaseTPM(t *testing.T) {
	lims := `{"id":"team_tpm","attach":{"node":"org:acme/team:ml"},"type":"tpm","amount":20000,"period":"1h","store":"redis"}`
	r, _ := leaseRig(t, lims)
	big := chatBody("gpt-4o-mini", germany, `,"max_tokens":16000`)
	if resp := r.chat(dev1Key, big); resp.Status != 200 || resp.Headers.Get("X-Tt-Suspended") != "" {
		t.Fatalf("the first reserve: %d %v %s", resp.Status, resp.Headers, resp.Body)
	}
	r.sync() // the row leaves
	for _, row := range r.acct.ledger() {
		if len(row.Reconcile) != 0 {
			t.Fatalf("the row carries reconciles %v; want the correction taken by the lot", row.Reconcile)
		}
	}
	// Reconciled to its 20 tokens, a second 16,000 fits again.
	if resp := r.chat(dev1Key, big); resp.Status != 200 {
		t.Fatalf("a second reserve after the first was reconciled: %d %s", resp.Status, resp.Body)
	}
}

// TestLeaseBudgetReserve: a reserve-mode budget with the fleet's Redis
// decides on the replica's lease: calls hold their dearest cost, the last
// one is lowered to what the fleet has left, and the next is refused by
// the fleet's spend.
func TestLeaseBudgetReserve(t *testing.T) {
	lims := `{"id":"dev1_day","attach":{"node":"org:acme/team:ml/user:dev1"},"type":"budget_usd","amount_usd":0.01,"period":"day","reserve":true}`
	r, m := leaseRig(t, lims)
	r.acct.set(func(*fakeAccountant) { m.spent["dev1_day|budget_usd|org:acme/team:ml/user:dev1||day|"] = 6_000_000 })
	body := chatBody("gpt-4o", "hi", `,"max_tokens":20`)
	admitted, lowered := 0, 0
	for i := 0; i < 25; i++ {
		resp := r.chat(dev1Key, body)
		if resp.Headers.Get("X-Tt-Suspended") != "" {
			var logs []string
			for _, l := range r.h.Logs() {
				logs = append(logs, l.Message)
			}
			t.Fatalf("call %d said suspended: %v %s %v", i, resp.Headers, resp.Body, logs)
		}
		if resp.Status == 200 {
			admitted++
			sent, _ := r.stub.Last()
			var b struct {
				MaxTokens int `json:"max_tokens"`
			}
			json.Unmarshal(sent.Body, &b)
			if b.MaxTokens < 20 {
				lowered++
			}
			continue
		}
		if resp.Status != 429 || resp.Headers.Get("X-Tt-Refused-By") != "dev1_day" {
			t.Fatalf("call %d: %d %s", i, resp.Status, resp.Body)
		}
	}
	if admitted == 0 || admitted == 25 || lowered == 0 {
		t.Fatalf("%d of 25 admitted (%d lowered) against the 4,000,000 nanodollars the fleet has left; want some admitted, the last lowered, the rest refused", admitted, lowered)
	}
	r.acct.set(func(*fakeAccountant) {
		g := m.granted["dev1_day|budget_usd|org:acme/team:ml/user:dev1||day|"]
		total := int64(0)
		for _, n := range g {
			total += n
		}
		if total > 4_000_000 {
			t.Errorf("the fleet leased %d nanodollars; only 4,000,000 were left", total)
		}
	})
}

// TestLeaseQuotaRequests: quota_requests with reserve: true holds one
// request per call: a burst of calls at once over two VMs is served
// exactly the amount, on one replica and with the fleet's Redis.
func TestLeaseQuotaRequests(t *testing.T) {
	lims := `{"id":"dev1_calls","attach":{"node":"org:acme/team:ml/user:dev1"},"type":"quota_requests","amount":5,"period":"day","reserve":true}`
	for _, fleet := range []bool{false, true} {
		t.Run(fmt.Sprintf("fleet_%v", fleet), func(t *testing.T) {
			o := rigOptions{governance: gov(lims, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true, workers: 2,
				acct: func(a *fakeAccountant) { a.snapshot = syncwire.Snapshot{Version: "s0"} }}
			if fleet {
				o.governance = gov(lims, fleetShared)
				o.acct = func(a *fakeAccountant) {
					m := newMemLeases(a.clock)
					a.redis, a.lease = true, m.serve
					a.snapshot = syncwire.Snapshot{Version: "s0"}
				}
			}
			r := newRig(t, o)
			r.sync()
			var wg sync.WaitGroup
			var mu sync.Mutex
			served := 0
			for i := 0; i < 32; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp := r.do(req{path: "/v1/chat/completions", key: dev1Key, body: chatBody("gpt-4o-mini", "hi"), vm: i%2 + 1,
						headers: map[string]string{"X-Stub-Delay-Ms": "50"}})
					mu.Lock()
					defer mu.Unlock()
					if resp.Headers.Get("X-Tt-Suspended") != "" {
						t.Errorf("suspended: %v", resp.Headers)
					}
					if resp.Status == 200 {
						served++
					} else if resp.Status != 429 || resp.Headers.Get("X-Tt-Refused-By") != "dev1_calls" {
						t.Errorf("%d %s", resp.Status, resp.Body)
					}
				}()
			}
			wg.Wait()
			if served != 5 {
				t.Fatalf("%d of 32 calls at once served against quota_requests 5 in reserve mode; want exactly 5", served)
			}
		})
	}
}

// TestLeaseQuotaTokensLowers: quota_tokens with reserve: true holds the
// call's most tokens and lowers its output maximum to what is left.
func TestLeaseQuotaTokensLowers(t *testing.T) {
	lims := `{"id":"dev1_tokens","attach":{"node":"org:acme/team:ml/user:dev1"},"type":"quota_tokens","amount":500,"period":"day","reserve":true}`
	r := newRig(t, rigOptions{governance: gov(lims, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true,
		acct: func(a *fakeAccountant) { a.snapshot = syncwire.Snapshot{Version: "s0"} }})
	r.sync()
	resp := r.chat(dev1Key, chatBody("gpt-4o-mini", "hi", `,"max_tokens":4000`))
	if resp.Headers.Get("X-Tt-Suspended") != "" {
		t.Fatalf("suspended: %v", resp.Headers)
	}
	if resp.Status != 200 {
		t.Fatalf("%d %s", resp.Status, resp.Body)
	}
	sent, _ := r.stub.Last()
	var b struct {
		MaxTokens int `json:"max_tokens"`
	}
	if err := json.Unmarshal(sent.Body, &b); err != nil || b.MaxTokens <= 0 || b.MaxTokens >= 500 {
		t.Fatalf("the provider got max_tokens %d (%s); want it lowered below the 500 tokens left", b.MaxTokens, sent.Body)
	}
}

// TestLeaseSlots: concurrency under store: share with the fleet's Redis
// holds the fleet's slots: this replica takes what it needs while the
// others hold theirs, and past them the fleet refuses. The served calls
// are held at the provider until every call has had its answer or reached
// it, so none ends (and gives its slot back) before the last one is
// decided, however slow the machine.
func TestLeaseSlots(t *testing.T) {
	lims := `{"id":"fleet_conc","attach":{"node":"org:acme"},"type":"concurrency","amount":4,"store":"share"}`
	r, m := leaseRig(t, lims)
	r.acct.set(func(*fakeAccountant) { m.slots["fleet_conc|concurrency|org:acme|||"] = map[string]int64{"other": 2} })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := len(r.stub.Requests())
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := r.do(req{path: "/v1/chat/completions", key: dev1Key, body: chatBody("gpt-4o-mini", "hi"), ctx: ctx,
				headers: map[string]string{"X-Stub-Delay-Ms": "600000"}})
			mu.Lock()
			codes[resp.Status]++
			mu.Unlock()
		}()
	}
	waitFor(t, "every call answered or at the provider", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return codes[429]+len(r.stub.Requests())-seen >= 6
	})
	mu.Lock()
	refused, served := codes[429], len(r.stub.Requests())-seen
	mu.Unlock()
	cancel()
	wg.Wait()
	if served != 2 || refused != 4 {
		t.Fatalf("6 calls at once: %d reached the provider, %d refused; want 2 served (4 slots, 2 held by another replica) and 4 refused", served, refused)
	}
}

// TestLeasePerValue: a per-model store: redis rpm keeps one counter per
// model in Redis and the lease of each in its model's slot here; while
// the slots' leases hold units, the models past max_distinct share the
// overflow slot, and with it the overflow counter in Redis. A slot whose
// lease has drained passes to the next model with empty lease cells: the
// new model draws on a lease of its own counter, never on units of the
// model before it.
func TestLeasePerValue(t *testing.T) {
	lims := `{"id":"model_rpm","attach":{"node":"org:acme"},"type":"rpm","amount":4,"period":"1m","algorithm":"fixed_window","store":"redis","match":{"model":"*"},"max_distinct":2}`
	r, m := leaseRig(t, lims)
	admitted := func(model string, n int) int {
		t.Helper()
		got := 0
		for i := 0; i < n; i++ {
			resp := r.chat(dev1Key, chatBody(model, germany))
			if s := resp.Headers.Get("X-Tt-Suspended"); s != "" {
				t.Fatalf("%s: suspended %q", model, s)
			}
			if resp.Status == 200 {
				got++
			}
			r.wait() // a refill ahead of need lands before the next request
		}
		return got
	}
	// m1 and m2 hold the two slots, and their leases units ahead of need.
	for _, model := range []string{"m1", "m2"} {
		if got := admitted(model, 1); got != 1 {
			t.Fatalf("%s: refused", model)
		}
	}
	// m3 and m4 overflow: one counter, 4 for both.
	if got := admitted("m3", 1) + admitted("m4", 5); got != 4 {
		t.Fatalf("m3 and m4 in the overflow: %d admitted, want the overflow counter's 4", got)
	}
	// m1 has its own 4.
	if got := admitted("m1", 4); got != 3 {
		t.Fatalf("m1: %d more admitted, want 3 (4 in all)", got)
	}
	r.acct.mu.Lock()
	var ids []string
	for id := range m.cells {
		ids = append(ids, id)
	}
	r.acct.mu.Unlock()
	overflow, m1 := 0, 0
	for _, id := range ids {
		switch {
		case strings.Contains(id, "*"):
			overflow++
		case strings.Contains(id, "m1"):
			m1++
		case strings.Contains(id, "m3") || strings.Contains(id, "m4"):
			t.Errorf("a counter of its own in Redis for an overflowed model: %s", id)
		}
	}
	if len(ids) != 3 || overflow != 1 || m1 != 1 {
		t.Errorf("counters in Redis: %q; want m1's, m2's and the overflow's", ids)
	}
	// The window turns; m5 takes a drained slot and gets a lease of its
	// own counter, and m1 (its slot taken or not) its own two again.
	r.step(2 * time.Minute)
	if got := admitted("m5", 5); got != 4 {
		t.Fatalf("m5 in a slot taken over: %d of 5 admitted, want 4", got)
	}
	n := 0
	for _, k := range r.h.SharedDataKeys() {
		if strings.HasPrefix(k, "tt/lease/r|") && strings.Contains(k, "model_rpm") {
			n++
		}
	}
	if n > 3 {
		t.Errorf("%d lease cells of model_rpm, want at most 3 (2 slots and the overflow)", n)
	}
}
