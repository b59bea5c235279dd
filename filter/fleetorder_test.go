package filter_test

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/wire"
	"github.com/tokentriage/tokentriage/wasmtest"
)

// TestFleetTPMOrderAtGate2: the first instance over in seed 004 order
// names the refusal whatever store each instance uses. A store: redis tpm
// on the team (depth 2) that the fleet refuses answers before a local tpm
// on the org (depth 1) that is over too; the user's local tpm reserve
// (depth 3, admitted) is handed back, and the org's counts nothing.
func TestFleetTPMOrderAtGate2(t *testing.T) {
	const lims = `{"id":"user_tpm","attach":{"node":"org:acme/team:ml/user:dev1"},"type":"tpm","amount":100000,"period":"1m"},` +
		`{"id":"team_tpm","attach":{"node":"org:acme/team:ml"},"type":"tpm","amount":100000,"period":"1m","store":"redis"},` +
		`{"id":"org_tpm","attach":{"node":"org:acme"},"type":"tpm","amount":16384,"period":"1m"}`
	shared := `,"shared_state":{"redis":{"addr":"127.0.0.1:1"}},"require_key":true`
	r := newRig(t, rigOptions{governance: gov(lims, shared), keys: []testKey{dev1Key}, accountant: true,
		acct: func(a *fakeAccountant) {
			a.admit = func(req syncwire.AdmitRequest) syncwire.AdmitAnswer {
				if len(req.Rate) == 0 {
					return syncwire.AdmitAnswer{} // a hand-back
				}
				return syncwire.AdmitAnswer{Rate: []syncwire.RateResult{{Allowed: false, Limit: 100000, RetryAfterNS: 30e9}}}
			}
		}})
	// A reserve of the body and 16,384 output tokens: past org_tpm's
	// 16,384 whatever its cell holds, so org_tpm is over too.
	body := chatBody("gpt-4o-mini", germany, `,"max_tokens":20000`)
	resp := r.chat(dev1Key, body)
	if resp.Status != 429 || resp.Headers.Get("X-Tt-Refused-By") != "team_tpm" || resp.Headers.Get("Retry-After") != "30" {
		t.Fatalf("team_tpm (fleet, depth 2) and org_tpm (local, depth 1) both over: %d refused by %q, Retry-After %q; want 429 by team_tpm after 30 s",
			resp.Status, resp.Headers.Get("X-Tt-Refused-By"), resp.Headers.Get("Retry-After"))
	}
	if got := r.meLimit(dev1Key, "user_tpm")["remaining"]; got != float64(100000) {
		t.Errorf("user_tpm remaining %v after the refusal, want 100000: its reserve is handed back", got)
	}
	if got := r.meLimit(dev1Key, "org_tpm")["remaining"]; got != float64(16384) {
		t.Errorf("org_tpm remaining %v after the refusal, want 16384: an instance after the first over counts nothing", got)
	}
	r.acct.mu.Lock()
	defer r.acct.mu.Unlock()
	if len(r.acct.admits) != 1 || len(r.acct.admits[0].Rate) != 1 || r.acct.admits[0].Rate[0].ID != "team_tpm|tpm|org:acme/team:ml||1m0s|gcra" {
		t.Errorf("the questions: %+v; want one, for team_tpm", r.acct.admits)
	}
}

// TestFleetRPMOrderAtGate1: a local instance over before a store: redis
// rpm instance stops the walk before the fleet is asked: a concurrency cap
// on the user (depth 3) that is full refuses, and the team's fleet rpm
// (depth 2) takes nothing in Redis.
func TestFleetRPMOrderAtGate1(t *testing.T) {
	const lims = `{"id":"user_conc","attach":{"node":"org:acme/team:ml/user:dev1"},"type":"concurrency","amount":1},` +
		`{"id":"team_rpm","attach":{"node":"org:acme/team:ml"},"type":"rpm","amount":100,"period":"1m","store":"redis"}`
	shared := `,"shared_state":{"redis":{"addr":"127.0.0.1:1"}},"require_key":true`
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		arrived <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"x","object":"chat.completion","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10}}`))
	})
	r := newRig(t, rigOptions{governance: gov(lims, shared), keys: []testKey{dev1Key}, accountant: true, upstream: up,
		acct: func(a *fakeAccountant) {
			a.admit = func(req syncwire.AdmitRequest) syncwire.AdmitAnswer {
				var ans syncwire.AdmitAnswer
				for range req.Rate {
					ans.Rate = append(ans.Rate, syncwire.RateResult{Allowed: true, Limit: 100, Remaining: 99})
				}
				return ans
			}
		}})
	body := chatBody("gpt-4o-mini", "hi")
	done := make(chan int, 1)
	go func() { done <- r.chat(dev1Key, body).Status }()
	<-arrived // the first call holds user_conc's one slot
	resp := r.chat(dev1Key, body)
	close(release)
	if st := <-done; st != 200 {
		t.Fatalf("the first call: %d", st)
	}
	if resp.Status != 429 || resp.Headers.Get("X-Tt-Refused-By") != "user_conc" {
		t.Fatalf("user_conc full: %d refused by %q; want 429 by user_conc", resp.Status, resp.Headers.Get("X-Tt-Refused-By"))
	}
	r.acct.mu.Lock()
	asked := len(r.acct.admits)
	r.acct.mu.Unlock()
	if asked != 1 {
		t.Fatalf("the fleet was asked %d times; want once (the first call): the refused call's team_rpm, after the first over, counts nothing", asked)
	}
}

// fakeHolds is the fleet's Redis for budget holds, as the accountant's
// script keeps them: what the other replicas spent, and the live holds
// by request id.
type fakeHolds struct {
	mu     sync.Mutex
	spent  int64
	holds  map[string]int64
	asked  []syncwire.RateStep
	freed  []string
	refuse bool
}

func (f *fakeHolds) admit(req syncwire.AdmitRequest) syncwire.AdmitAnswer {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.holds == nil {
		f.holds = map[string]int64{}
	}
	if len(req.Release) > 0 {
		delete(f.holds, req.RequestID)
		f.freed = append(f.freed, req.RequestID)
	}
	var ans syncwire.AdmitAnswer
	for _, st := range req.Rate {
		f.asked = append(f.asked, st)
		used, inFlight := f.spent, int64(0)
		for _, h := range f.holds {
			used += h
			inFlight += h
		}
		room := st.Amount - used
		switch {
		case f.refuse || room < st.Least:
			ans.Rate = append(ans.Rate, syncwire.RateResult{Allowed: false, Limit: st.Amount, Used: used, InFlight: inFlight})
			return ans
		case st.N <= room:
			f.holds[req.RequestID] = st.N
		default:
			f.holds[req.RequestID] = room
		}
		ans.Rate = append(ans.Rate, syncwire.RateResult{Allowed: true, Limit: st.Amount, Held: f.holds[req.RequestID], Used: used, InFlight: inFlight})
	}
	return ans
}

// TestFleetBudgetHold: with an accountant that has the fleet's Redis, a
// budget in reserve mode holds the call's dearest cost there under the
// request's id, and the answer decides: the output maximum is lowered to
// what the hold pays for, a refusal names the budget with the fleet's
// spend, the row names the hold for the accountant to release, and a
// refusal by a later instance releases it at once. When Redis does not
// decide, the replica's own reserve answers and the call says suspended.
func TestFleetBudgetHold(t *testing.T) {
	lims := `{"id":"dev1_day","attach":{"node":"org:acme/team:ml/user:dev1"},"type":"budget_usd","amount_usd":0.001,"period":"day","reserve":true},` +
		`{"id":"org_monthly_budget","attach":{"node":"org:acme"},"type":"budget_usd","amount_usd":0.000001,"period":"month"}`
	fh := &fakeHolds{}
	r := newRig(t, rigOptions{governance: gov(lims, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true,
		acct: func(a *fakeAccountant) {
			a.prices = reservePrices
			a.snapshot = syncwire.Snapshot{Version: "s0"}
			a.redis = true
			a.admit = fh.admit
		}})
	r.sync()
	maxTok := regexp.MustCompile(`"max_tokens":(\d+)`)
	body := chatBody("gpt-4o", germany, `,"max_tokens":20`)
	dear := int64(len(body))*2500 + 20*10000

	// The other replicas spent all but one call's dearest cost and
	// 100,000 less than another's.
	part := dear - 100_000
	fh.mu.Lock()
	fh.spent = 1_000_000 - dear - part
	fh.mu.Unlock()
	resp := r.chat(dev1Key, body)
	mustStatus(t, resp, 200)
	fh.mu.Lock()
	st := fh.asked[0]
	fh.mu.Unlock()
	if st.Alg != "hold" || st.ID != "dev1_day|budget_usd|org:acme/team:ml/user:dev1||day|" || st.N != dear || st.Least != int64(len(body))*2500+10000 || st.Unit != "day" || st.LeaseNS != int64(15*time.Minute) {
		t.Fatalf("the hold asked: %+v; want the dearest cost %d, least %d, the day, a 15 minute lease", st, dear, int64(len(body))*2500+10000)
	}
	// The second call fits only in part: its output maximum is lowered.
	mustStatus(t, r.chat(dev1Key, body), 200)
	rec, _ := r.stub.Last()
	m := maxTok.FindSubmatch(rec.Body)
	if m == nil {
		t.Fatalf("the provider got no max_tokens: %s", rec.Body)
	}
	if got, want := mustAtoi(t, string(m[1])), (part-int64(len(body))*2500)/10000; got != want || want <= 0 || want >= 20 {
		t.Errorf("lowered to max_tokens %d; want %d, what the fleet's hold of %d pays for", got, want, part)
	}
	// Nothing is left: the fleet refuses, naming the budget.
	resp = r.chat(dev1Key, body)
	if resp.Status != 429 || resp.Headers.Get("X-Tt-Refused-By") != "dev1_day" {
		t.Fatalf("the fleet's budget all held: %d by %q", resp.Status, resp.Headers.Get("X-Tt-Refused-By"))
	}
	// Decided where every replica's calls are held: exact, and said so.
	if b := string(resp.Body); !strings.Contains(b, `"approximate":false,"note":"budget reserve mode, held in the fleet's shared Redis`) {
		t.Errorf("the fleet's refusal: %s; want it exact, held in the fleet's shared Redis", b)
	}
	// What refuses it is what the two calls in flight hold, not spend:
	// the budget does not reset at the day's end for it, and comes back
	// as they settle, so the refusal names no reset time and no wait.
	wantInFlight(t, resp, string(wire.AppendUSD(nil, dear+part)))

	// Spent by settled calls, with nothing in flight: the day's end.
	fh.mu.Lock()
	fh.spent, fh.holds = 1_000_000-10, nil
	fh.mu.Unlock()
	resp = r.chat(dev1Key, body)
	if resp.Status != 429 || resp.Headers.Get("Retry-After") == "" || strings.Contains(string(resp.Body), "in_flight") || !strings.Contains(string(resp.Body), `"resets_at"`) {
		t.Errorf("the fleet's budget spent: %d %v %s; want a 429 until the period's end", resp.Status, resp.Headers, resp.Body)
	}
	fh.mu.Lock()
	fh.spent = 1_000_000 - dear - part
	fh.holds = map[string]int64{"a": dear, "b": part}
	fh.mu.Unlock()
	// The rows name the holds for the accountant to release.
	r.step(time.Second)
	held := 0
	for _, row := range r.acct.ledger() {
		if len(row.Holds) == 1 && regexp.MustCompile(`^day \d+ dev1_day\|`).MatchString(row.Holds[0]) {
			held++
		}
	}
	if held != 2 {
		t.Errorf("%d rows name a hold; want the 2 admitted calls'", held)
	}

	// A later instance refuses (the org's monthly budget, spent): the
	// hold is released at once.
	fh.mu.Lock()
	fh.spent, fh.holds = 0, nil
	fh.mu.Unlock()
	seedSnapshot(r.acct)
	r.sync()
	resp = r.chat(dev1Key, body)
	if resp.Status != 429 || resp.Headers.Get("X-Tt-Refused-By") != "org_monthly_budget" {
		t.Fatalf("a call over org_monthly_budget: %d by %q", resp.Status, resp.Headers.Get("X-Tt-Refused-By"))
	}
	r.wait()
	fh.mu.Lock()
	freed, live := len(fh.freed), len(fh.holds)
	fh.mu.Unlock()
	if freed != 1 || live != 0 {
		t.Errorf("after a refusal by org_tpm: %d releases, %d holds live; want the hold released", freed, live)
	}

	// Redis does not decide: the replica's own reserve answers, saying so.
	r.acct.setSnapshot("s2")
	r.sync()
	r.acct.mu.Lock()
	r.acct.admit = func(syncwire.AdmitRequest) syncwire.AdmitAnswer {
		return syncwire.AdmitAnswer{Suspended: "the shared Redis did not decide: redis is down"}
	}
	r.acct.mu.Unlock()
	resp = r.chat(dev1Key, body)
	if resp.Status != 200 || resp.Headers.Get("X-Tt-Suspended") != "dev1_day" {
		t.Fatalf("Redis down: %d, X-Tt-Suspended %q; want 200 from the replica's reserve, suspended", resp.Status, resp.Headers.Get("X-Tt-Suspended"))
	}
}

// wantInFlight checks a reserve-mode refusal that calls in flight cause:
// no Ratelimit, Retry-After, resets_at or retry_after_s, X-Should-Retry
// false, and in_flight (USD) in refused_by.
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

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFleetBudgetHoldPastTheDeadline: a budget hold whose answer misses
// shared_state.redis.timeout may have been taken in Redis all the same;
// the call, admitted by the replica's own reserve and saying suspended,
// names it on its row, so the accountant that records the row releases
// it instead of it holding the fleet's budget, beside the call's own
// cost, until its lease lapses.
func TestFleetBudgetHoldPastTheDeadline(t *testing.T) {
	lims := `{"id":"dev1_day","attach":{"node":"org:acme/team:ml/user:dev1"},"type":"budget_usd","amount_usd":0.001,"period":"day","reserve":true}`
	shared := `,"shared_state":{"redis":{"addr":"127.0.0.1:1","timeout":"5ms"}},"require_key":true`
	fh := &fakeHolds{}
	asked := make(chan struct{}, 1)
	release := make(chan struct{})
	r := newRig(t, rigOptions{governance: gov(lims, shared), keys: []testKey{dev1Key}, accountant: true,
		acct: func(a *fakeAccountant) {
			a.prices = reservePrices
			a.snapshot = syncwire.Snapshot{Version: "s0"}
			a.redis = true
			a.admit = func(req syncwire.AdmitRequest) syncwire.AdmitAnswer {
				if len(req.Rate) == 0 {
					return fh.admit(req)
				}
				asked <- struct{}{}
				<-release // the script runs and holds, after the deadline passed
				return fh.admit(req)
			}
		}})
	r.sync()
	done := make(chan wasmtest.Response, 1)
	go func() { done <- r.chat(dev1Key, chatBody("gpt-4o", germany, `,"max_tokens":20`)) }()
	<-asked
	r.clock.Advance(30 * time.Millisecond) // the Redis deadline and the hop's allowance: the callout times out, a 504
	resp := <-done
	close(release)
	if resp.Status != 200 || resp.Headers.Get("X-Tt-Suspended") != "dev1_day" {
		t.Fatalf("past the deadline: %d, X-Tt-Suspended %q; want 200 from the replica's reserve, saying suspended", resp.Status, resp.Headers.Get("X-Tt-Suspended"))
	}
	r.step(time.Second)
	fh.mu.Lock()
	live := len(fh.holds)
	fh.mu.Unlock()
	if live != 1 {
		t.Fatalf("%d holds in the fleet store; want the one the late script took", live)
	}
	rid := resp.Headers.Get("X-Tt-Request-Id")
	found := false
	for _, row := range r.acct.ledger() {
		if row.RequestID == rid {
			found = true
			if len(row.Holds) != 1 || !regexp.MustCompile(`^day \d+ dev1_day\|`).MatchString(row.Holds[0]) {
				t.Errorf("the row of the call whose hold answer came late names holds %q; want its hold on dev1_day, for the accountant to release", row.Holds)
			}
		}
	}
	if !found {
		t.Fatalf("no row for %s", rid)
	}
}
