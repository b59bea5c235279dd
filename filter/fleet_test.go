package filter_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/wasmtest"
)

// TestFleetStoreAtGate1: a store: redis rpm instance is decided by the
// accountant's answer (one question per request, the request waiting for
// it); when Redis does not decide, the replica's own cell answers and the
// request says suspended, and a fail: closed hard limit answers 503.
func TestFleetStoreAtGate1(t *testing.T) {
	const lims = `{"id":"fleet_rpm","attach":{"node":"org:acme"},"type":"rpm","amount":2,"period":"1m","store":"redis"},` +
		`{"id":"closed_rpm","attach":{"node":"org:acme/team:ml"},"type":"rpm","amount":100,"period":"1m","store":"redis","posture":{"fail":"closed"}},` +
		`{"id":"user_rpm","attach":{"level":"user"},"type":"rpm","amount":100,"period":"1m"}`
	shared := `,"shared_state":{"redis":{"addr":"127.0.0.1:1"}},"require_key":true`
	allowed := func(req syncwire.AdmitRequest) syncwire.AdmitAnswer {
		var a syncwire.AdmitAnswer
		for range req.Rate {
			// 30 s of the cell to drain: one unit of fleet_rpm's 2 a minute.
			a.Rate = append(a.Rate, syncwire.RateResult{Allowed: true, Limit: 100, Remaining: 50, ResetAfterNS: 30e9})
		}
		return a
	}
	r := newRig(t, rigOptions{governance: gov(lims, shared), keys: []testKey{dev1Key}, accountant: true,
		acct: func(a *fakeAccountant) { a.admit = allowed }})
	body := chatBody("gpt-4o-mini", "hi")

	// Decided by the fleet: three requests against an amount of 2, all
	// admitted because the fleet said so, none suspended.
	for i := 0; i < 3; i++ {
		resp := r.chat(dev1Key, body)
		if resp.Status != 200 || resp.Headers.Get("X-Tt-Suspended") != "" {
			t.Fatalf("request %d decided by the fleet: %d, suspended %q", i, resp.Status, resp.Headers.Get("X-Tt-Suspended"))
		}
	}
	// /tt/v1/me shows the fleet's last answer, not the unused local cell.
	if m := r.meLimit(dev1Key, "fleet_rpm"); m["remaining"] != float64(1) || m["observed"] != float64(1) || m["suspended"] != false {
		t.Errorf("/tt/v1/me of a store: redis limit the fleet decides: %v", m)
	}
	r.acct.mu.Lock()
	asked := r.acct.admits
	r.acct.mu.Unlock()
	if len(asked) != 3 || len(asked[0].Rate) != 2 || asked[0].Rate[0].ID != "closed_rpm|rpm|org:acme/team:ml||1m0s|gcra" || asked[0].Rate[1].N != 1 {
		t.Fatalf("the questions: %+v; want one per request, the two redis instances deepest first", asked)
	}

	// The fleet refuses the second instance: a 429 naming it, with the
	// fleet's retry.
	r.acct.mu.Lock()
	r.acct.admit = func(req syncwire.AdmitRequest) syncwire.AdmitAnswer {
		return syncwire.AdmitAnswer{Rate: []syncwire.RateResult{{Allowed: true, Limit: 100, Remaining: 9}, {Allowed: false, Limit: 2, RetryAfterNS: 20e9}}}
	}
	r.acct.mu.Unlock()
	if resp := r.chat(dev1Key, body); resp.Status != 429 || resp.Headers.Get("X-Tt-Refused-By") != "fleet_rpm" || resp.Headers.Get("Retry-After") != "20" {
		t.Fatalf("refused by the fleet: %d %v %s", resp.Status, resp.Headers, resp.Body)
	}

	// Redis does not decide: the closed limit answers 503, before anything
	// else is counted.
	r.acct.mu.Lock()
	r.acct.admit = func(syncwire.AdmitRequest) syncwire.AdmitAnswer {
		return syncwire.AdmitAnswer{Suspended: "the shared Redis did not decide: redis is down"}
	}
	r.acct.mu.Unlock()
	resp := r.chat(dev1Key, body)
	if resp.Status != 503 || !strings.Contains(string(resp.Body), "redis is down") {
		t.Fatalf("fail: closed with Redis down: %d %s", resp.Status, resp.Body)
	}
	if n := r.metric("tokentriage.suspended"); n != 0 {
		t.Errorf("a 503 counted %d suspended", n)
	}
}

// TestFleetStoreMeDrains: /tt/v1/me of a store: redis rpm shows the fleet's
// last answer drained to now: a cell the fleet said was full reads empty
// once it has drained, not full until the next request asks again, says
// when its next unit frees, as the 429 did, and reads the same on every
// worker VM of the replica, not only on the one that asked.
func TestFleetStoreMeDrains(t *testing.T) {
	const lims = `{"id":"fleet_rpm","attach":{"node":"org:acme"},"type":"rpm","amount":30,"period":"1m","store":"redis"}`
	shared := `,"shared_state":{"redis":{"addr":"127.0.0.1:1"}},"require_key":true`
	r := newRig(t, rigOptions{governance: gov(lims, shared), keys: []testKey{dev1Key}, accountant: true,
		acct: func(a *fakeAccountant) {
			a.admit = func(syncwire.AdmitRequest) syncwire.AdmitAnswer {
				// The 31st request of 30 in a minute, all at once.
				return syncwire.AdmitAnswer{Rate: []syncwire.RateResult{{Allowed: false, Limit: 30, Remaining: 0, RetryAfterNS: 2e9, ResetAfterNS: 60e9}}}
			}
		}})
	if resp := r.chat(dev1Key, chatBody("gpt-4o-mini", "hi")); resp.Status != 429 || resp.Headers.Get("Retry-After") != "2" {
		t.Fatalf("refused by the fleet: %d %v %s", resp.Status, resp.Headers, resp.Body)
	}
	for _, c := range []struct {
		step                            time.Duration
		observed, remaining, retryAfter float64
	}{
		{0, 30, 0, 2},
		{30 * time.Second, 15, 15, 0},
		{31 * time.Second, 0, 30, 0},
	} {
		r.step(c.step)
		// Whichever VM answers: the one that asked the fleet, or another.
		for vm := 1; vm <= r.h.Workers(); vm++ {
			resp := r.do(req{method: "GET", path: "/tt/v1/me", key: dev1Key, vm: vm})
			var doc struct {
				Limits []map[string]any `json:"limits"`
			}
			if err := json.Unmarshal(resp.Body, &doc); err != nil || resp.Status != 200 || len(doc.Limits) != 1 {
				t.Fatalf("/tt/v1/me on VM %d: %d %s", vm, resp.Status, resp.Body)
			}
			m := doc.Limits[0]
			if m["observed"] != c.observed || m["remaining"] != c.remaining || m["retry_after_s"] != c.retryAfter || m["suspended"] != false {
				t.Errorf("/tt/v1/me on VM %d after %v more: %v; want observed %v, remaining %v, retry_after_s %v", vm, c.step, m, c.observed, c.remaining, c.retryAfter)
			}
		}
	}
}

// TestFleetStoreSuspended: with Redis not deciding, an open limit is judged
// by the replica's own cell, and says so on the answer and in the metric.
func TestFleetStoreSuspended(t *testing.T) {
	const lims = `{"id":"fleet_rpm","attach":{"node":"org:acme"},"type":"rpm","amount":2,"period":"1m","store":"redis"}`
	shared := `,"shared_state":{"redis":{"addr":"127.0.0.1:1"}},"require_key":true`
	r := newRig(t, rigOptions{governance: gov(lims, shared), keys: []testKey{dev1Key}, accountant: true,
		acct: func(a *fakeAccountant) {
			a.admit = func(syncwire.AdmitRequest) syncwire.AdmitAnswer {
				return syncwire.AdmitAnswer{Suspended: "the shared Redis did not decide: redis is down"}
			}
		}})
	body := chatBody("gpt-4o-mini", "hi")
	for i, want := range []int{200, 200, 429} {
		resp := r.chat(dev1Key, body)
		if resp.Status != want {
			t.Fatalf("request %d with Redis down: %d, want %d (the local cell of amount 2)", i, resp.Status, want)
		}
		if want == 200 && resp.Headers.Get("X-Tt-Suspended") != "fleet_rpm" {
			t.Fatalf("request %d admitted locally without saying suspended: %v", i, resp.Headers)
		}
	}
	if n := r.metric("tokentriage.suspended"); n != 3 {
		t.Errorf("tokentriage.suspended = %d, want 3", n)
	}
}

// TestFleetStoreSuspendedCountsWhatTheFleetAdmitted: arrivals the fleet
// admitted on this replica are in its own cell too, so when Redis stops
// deciding the local cell goes on from them: the fleet admits at most what
// local cells would, not that on top of what Redis already admitted.
func TestFleetStoreSuspendedCountsWhatTheFleetAdmitted(t *testing.T) {
	const lims = `{"id":"fleet_rpm","attach":{"node":"org:acme"},"type":"rpm","amount":2,"period":"1m","store":"redis"}`
	shared := `,"shared_state":{"redis":{"addr":"127.0.0.1:1"}},"require_key":true`
	var down atomic.Bool
	r := newRig(t, rigOptions{governance: gov(lims, shared), keys: []testKey{dev1Key}, accountant: true,
		acct: func(a *fakeAccountant) {
			a.admit = func(syncwire.AdmitRequest) syncwire.AdmitAnswer {
				if down.Load() {
					return syncwire.AdmitAnswer{Suspended: "the shared Redis did not decide: redis is down"}
				}
				return syncwire.AdmitAnswer{Rate: []syncwire.RateResult{{Allowed: true, Limit: 2, Remaining: 1}}}
			}
		}})
	body := chatBody("gpt-4o-mini", "hi")
	for i := 0; i < 2; i++ {
		if resp := r.chat(dev1Key, body); resp.Status != 200 || resp.Headers.Get("X-Tt-Suspended") != "" {
			t.Fatalf("request %d decided by the fleet: %d, suspended %q", i, resp.Status, resp.Headers.Get("X-Tt-Suspended"))
		}
	}
	down.Store(true)
	if resp := r.chat(dev1Key, body); resp.Status != 429 || resp.Headers.Get("X-Tt-Refused-By") != "fleet_rpm" {
		t.Fatalf("Redis down after the fleet admitted this replica's 2 of 2: %d %s; want the local cell, which counted them, to refuse", resp.Status, resp.Body)
	}
}

// TestFleetTPMSuspendedCountsWhatTheFleetAdmitted: a tpm reserve the fleet
// admitted on this replica is in its own cell too, handed back there with
// a refusal and corrected there at settlement by the reconcile Redis gets,
// so when Redis stops deciding the local cell goes on from the tokens the
// fleet admitted, not from an empty window. While the fleet decides, the
// local cell refuses nothing, even past its amount.
func TestFleetTPMSuspendedCountsWhatTheFleetAdmitted(t *testing.T) {
	const lims = `{"id":"team_tpm","attach":{"node":"org:acme/team:ml"},"type":"tpm","amount":20000,"period":"1m","store":"redis"},` +
		`{"id":"org_tpm","attach":{"node":"org:acme"},"type":"tpm","amount":16384,"period":"1m","match":{"model":"gpt-4o"}}`
	shared := `,"shared_state":{"redis":{"addr":"127.0.0.1:1"}},"require_key":true`
	var down atomic.Bool
	var used atomic.Int64 // the total_tokens the upstream reports, 5 of them output
	up := http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":5,"total_tokens":%d}}`, used.Load()-5, used.Load())
	})
	r := newRig(t, rigOptions{governance: gov(lims, shared), keys: []testKey{dev1Key}, accountant: true, upstream: up,
		acct: func(a *fakeAccountant) {
			a.admit = func(req syncwire.AdmitRequest) syncwire.AdmitAnswer {
				switch {
				case len(req.Rate) == 0:
					return syncwire.AdmitAnswer{} // a hand-back
				case down.Load():
					return syncwire.AdmitAnswer{Suspended: "the shared Redis did not decide: redis is down"}
				}
				return syncwire.AdmitAnswer{Rate: []syncwire.RateResult{{Allowed: true, Limit: 20000, Remaining: 10000}}}
			}
		}})
	call := func(model string, maxTokens int, usage int64) wasmtest.Response {
		t.Helper()
		used.Store(usage)
		return r.chat(dev1Key, chatBody(model, germany, fmt.Sprintf(`,"max_tokens":%d`, maxTokens)))
	}
	fleet := func(what string, resp wasmtest.Response) {
		t.Helper()
		if resp.Status != 200 || resp.Headers.Get("X-Tt-Suspended") != "" {
			t.Fatalf("%s, decided by the fleet: %d, suspended %q %s", what, resp.Status, resp.Headers.Get("X-Tt-Suspended"), resp.Body)
		}
	}
	// The fleet admits team_tpm's reserve of 16,384 and more, org_tpm
	// (local, gpt-4o only) cannot fit it: the reserve is handed back, in
	// the replica's cell too.
	if resp := call("gpt-4o", 20000, 0); resp.Status != 429 || resp.Headers.Get("X-Tt-Refused-By") != "org_tpm" {
		t.Fatalf("a reserve past org_tpm's 16384: %d refused by %q; want 429 by org_tpm", resp.Status, resp.Headers.Get("X-Tt-Refused-By"))
	}
	fleet("a reserve of 16,000 using 200", call("gpt-4o-mini", 16000, 200)) // the cell: 200
	fleet("a reserve of 50 using 17,000", call("gpt-4o-mini", 50, 17000))   // the cell: 17,200
	fleet("a reserve of 8,000 using 200", call("gpt-4o-mini", 8000, 200))   // past the cell's 20,000 while reserved; then 17,400
	down.Store(true)
	// The cell holds 17,400 of 20,000: a reserve of about 1,000 fits, and
	// leaves 17,600 once reconciled to 200.
	if resp := call("gpt-4o-mini", 1000, 200); resp.Status != 200 || resp.Headers.Get("X-Tt-Suspended") != "team_tpm" {
		t.Fatalf("Redis down, the replica's cell holding what the fleet admitted net of hand-backs and reconciles (17,400 of 20,000): %d suspended %q %s; want 200 from the local cell",
			resp.Status, resp.Headers.Get("X-Tt-Suspended"), resp.Body)
	}
	if resp := call("gpt-4o-mini", 4000, 200); resp.Status != 429 || resp.Headers.Get("X-Tt-Refused-By") != "team_tpm" {
		t.Fatalf("Redis down, a reserve of about 4,000 on a cell holding 17,600 of 20,000: %d %s; want the local cell, which counted what the fleet admitted, to refuse", resp.Status, resp.Body)
	}
}

// TestFleetStoreDeadline: an accountant that does not answer within
// shared_state.redis.timeout and the hop's allowance (the callout's own
// timeout, on the host's clock) leaves the request to the replica's own
// cell, and the answer says suspended; the Redis deadline alone is not
// the callout's.
func TestFleetStoreDeadline(t *testing.T) {
	const lims = `{"id":"fleet_rpm","attach":{"node":"org:acme"},"type":"rpm","amount":5,"period":"1m","store":"redis"}`
	shared := `,"shared_state":{"redis":{"addr":"127.0.0.1:1","timeout":"5ms"}},"require_key":true`
	asked := make(chan struct{}, 1)
	release := make(chan struct{})
	r := newRig(t, rigOptions{governance: gov(lims, shared), keys: []testKey{dev1Key}, accountant: true,
		acct: func(a *fakeAccountant) {
			a.admit = func(req syncwire.AdmitRequest) syncwire.AdmitAnswer {
				asked <- struct{}{}
				<-release // answers only after the deadline passed
				return syncwire.AdmitAnswer{Rate: []syncwire.RateResult{{Allowed: false, Limit: 5}}}
			}
		}})
	done := make(chan wasmtest.Response, 1)
	go func() { done <- r.chat(dev1Key, chatBody("gpt-4o-mini", "hi")) }()
	<-asked
	r.clock.Advance(5 * time.Millisecond) // Redis's own deadline: the way back may still take fleetHop
	select {
	case resp := <-done:
		t.Fatalf("answered at the Redis deadline, before the hop's allowance: %d, X-Tt-Suspended %q", resp.Status, resp.Headers.Get("X-Tt-Suspended"))
	default:
	}
	r.clock.Advance(25 * time.Millisecond) // and the hop's allowance: the callout times out, a 504
	resp := <-done
	close(release)
	if resp.Status != 200 || resp.Headers.Get("X-Tt-Suspended") != "fleet_rpm" {
		t.Fatalf("past the deadline: %d, X-Tt-Suspended %q; want 200 from the local cell, saying suspended", resp.Status, resp.Headers.Get("X-Tt-Suspended"))
	}
	said := false
	for _, l := range r.h.Logs() {
		said = said || strings.Contains(l.Message, "no answer within 30ms (shared_state.redis.timeout 5ms and 25ms for the way to the accountant and back)")
	}
	if !said {
		t.Errorf("no log line naming the round trip's 30 ms deadline; the log: %v", r.h.Logs())
	}
}
