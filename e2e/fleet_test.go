package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/fleettest"
	"github.com/tokentriage/tokentriage/internal/redistest"
)

// The fleet: three `tokentriage dev` processes (each its own gateway,
// shared data, accountant and ledger) and one real redis-server, as seed
// 000's "across replicas" column describes, at the default settings
// (shared_state.redis.timeout 5 ms included). Traffic is anonymous
// (require_key off, so every request resolves to [__global]) so that no
// test depends on a key reaching every replica, but for the limits pinned
// at the team, which each replica's own demo key reaches.

// rpmBurstLimits is one rpm 30 an hour on store: redis per algorithm,
// each on an endpoint of its own (YAML, under limits:).
const rpmBurstLimits = `    - id: rpm_gcra
      attach: { node: __global }
      type: rpm
      amount: 30
      period: 1h
      store: redis
      match: { endpoint: /v1/chat/completions }
    - id: rpm_fixed
      attach: { node: __global }
      type: rpm
      amount: 30
      period: 1h
      algorithm: fixed_window
      store: redis
      match: { endpoint: /v1/completions }
    - id: rpm_sliding
      attach: { node: __global }
      type: rpm
      amount: 30
      period: 1h
      algorithm: sliding_window
      store: redis
      match: { endpoint: /v1/embeddings }
`

// fleetConfig: an rpm limit per algorithm, each on its own endpoint; a tpm
// on /v1/messages; and on /v1/responses, by model, a budget of the
// default class (gpt-4o), a budget in reserve mode (gpt-4o-mini), a
// request quota and a token quota in reserve mode (gpt-4.1-mini,
// gpt-4.1-nano). The team's rpm on /v1/messages is for the Redis outage,
// with a model the tpm does not count.
const fleetConfig = `governance:
  enabled: true
  require_key: false
  shared_state:
    redis: { addr: "127.0.0.1:1" }
  tenants:
    - org: acme
      teams: [ml]
      users: { ml: [dev1] }
  limits:
` + rpmBurstLimits + `    - id: fleet_tpm
      attach: { node: __global }
      type: tpm
      amount: 20000
      period: 24h
      store: redis
      match: { endpoint: /v1/messages, model: claude-3-5-haiku-latest }
    - id: team_rpm
      attach: { node: "org:acme/team:ml" }
      type: rpm
      amount: 30
      period: 1h
      store: redis
      match: { endpoint: /v1/messages }
    - id: fleet_budget
      attach: { node: __global }
      type: budget_usd
      amount_usd: 0.000001
      period: month
      match: { model: gpt-4o }
    - id: fleet_reserve
      attach: { node: __global }
      type: budget_usd
      amount_usd: 0.0001
      period: day
      reserve: true
      match: { model: gpt-4o-mini, endpoint: /v1/responses }
    - id: fleet_calls
      attach: { node: __global }
      type: quota_requests
      amount: 5
      period: day
      reserve: true
      match: { model: gpt-4.1-mini }
    - id: fleet_tokens
      attach: { node: __global }
      type: quota_tokens
      amount: 2000
      period: day
      reserve: true
      match: { model: gpt-4.1-nano }
`

// writeConfig writes a config file into the test's directory.
func writeConfig(t testing.TB, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokentriage.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// answer is what a test reads of one gateway answer.
type answer struct {
	status     int
	suspended  string // X-Tt-Suspended
	refusedBy  string // X-Tt-Refused-By
	retryAfter string // Retry-After
	body       string
}

// bodies of the test's calls, by endpoint.
var fleetBodies = map[string]string{
	"/v1/chat/completions": `{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"Say hi"}]}`,
	"/v1/completions":      `{"model":"gpt-4o-mini","max_tokens":16,"prompt":"Say hi"}`,
	"/v1/embeddings":       `{"model":"text-embedding-3-small","input":"Say hi"}`,
	"/v1/responses":        `{"model":"gpt-4o","max_output_tokens":16,"input":"Say hi"}`,
	"/v1/messages":         `{"model":"claude-3-5-haiku-latest","max_tokens":16000,"messages":[{"role":"user","content":"Say hi"}]}`,
}

// call sends one request to the gateway at base; headers are name, value
// pairs to add.
func call(ctx context.Context, base, path string, headers ...string) (answer, error) {
	return callBody(ctx, base, path, fleetBodies[path], headers...)
}

// callBody sends body to path. An answer cut short is taken as read.
func callBody(ctx context.Context, base, path, body string, headers ...string) (answer, error) {
	resp, b, err := roundTrip(ctx, http.MethodPost, base+path, body, headers...)
	if resp == nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, suspended: resp.Header.Get("X-Tt-Suspended"),
		refusedBy: resp.Header.Get("X-Tt-Refused-By"), retryAfter: resp.Header.Get("Retry-After"), body: string(b)}, nil
}

// burst sends n requests of body to path at once, round-robin over the
// replicas (each its own goroutine), and returns every answer.
func burst(ctx context.Context, t testing.TB, reps []*fleettest.Replica, path, body string, n int, headers ...string) []answer {
	t.Helper()
	out := make([]answer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i], errs[i] = callBody(ctx, reps[i%len(reps)].URL, path, body, headers...)
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// tally counts a burst's answers: admitted, refused by limit id, and
// suspended (by id); any other answer fails the test.
func tally(t testing.TB, answers []answer, id string) (admitted, refused, suspended int) {
	t.Helper()
	for i, a := range answers {
		switch {
		case a.status == 200:
			admitted++
		case a.status == 429 && a.refusedBy == id:
			refused++
		default:
			t.Fatalf("request %d: %d %s", i, a.status, a.body)
		}
		if strings.Contains(a.suspended, id) {
			suspended++
		}
	}
	return admitted, refused, suspended
}

// fleetMe is /tt/v1/me of replica base, anonymous.
func fleetMe(ctx context.Context, t testing.TB, base string) meDoc {
	t.Helper()
	var doc meDoc
	meAt(ctx, t, base, "", &doc)
	return doc
}

// settledUse waits until a LedgerSettled limit's fleet use, as the
// replicas' /tt/v1/me show it, stops moving (every row folded, published
// and read), and returns the highest a replica shows.
func settledUse(ctx context.Context, t testing.TB, f *fleettest.Fleet, id string, usd bool) int64 {
	t.Helper()
	last, same := int64(-1), 0
	var used int64
	for same < 6 {
		used = 0
		for _, rep := range f.Replicas() {
			l := fleetMe(ctx, t, rep.URL).limit(t, id)
			n := l.Observed
			if usd {
				n, _ = nanos(l.ObservedUSD.USD)
			}
			used = max(used, n)
		}
		if used == last {
			same++
		} else {
			same, last = 0, used
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the fleet's use of %s never settled", id)
		case <-time.After(250 * time.Millisecond):
		}
	}
	return used
}

// TestFleet runs the fleet's promises on one fleet of three real replicas
// and one real Redis, at the default settings, in order: the last ones
// flush and kill Redis.
func TestFleet(t *testing.T) {
	r := redistest.Start(t)
	f := fleettest.Start(t, fleettest.Options{Replicas: 3, Config: writeConfig(t, fleetConfig), Redis: r.Addr, NoControl: true})
	ctx := testContext(t)

	// rpm on store: redis, amount 30: 90 calls at once over the three
	// replicas admit at most 30 and at least 27 (what a replica's lease
	// holds when its calls run out is the most that can be left unused),
	// none decided by a replica alone, for each algorithm. Each replica
	// takes its lease from Redis and decides on it; the calls that find it
	// empty wait for a refill.
	for _, c := range []struct{ alg, id, path string }{
		{"gcra", "rpm_gcra", "/v1/chat/completions"},
		{"fixed_window", "rpm_fixed", "/v1/completions"},
		{"sliding_window", "rpm_sliding", "/v1/embeddings"},
	} {
		t.Run("rpm_burst_"+c.alg, func(t *testing.T) {
			hour := time.Now().Truncate(time.Hour)
			answers := burst(ctx, t, f.Replicas(), c.path, fleetBodies[c.path], 90)
			admitted, refused, suspended := tally(t, answers, c.id)
			t.Logf("%s: %d admitted, %d refused, %d suspended of 90", c.alg, admitted, refused, suspended)
			if rolled := !time.Now().Truncate(time.Hour).Equal(hour); rolled && c.alg != "gcra" {
				t.Logf("the hour rolled over during the burst: a new window, rightly more admitted")
				return
			}
			if suspended > 0 {
				t.Fatalf("%d answers said suspended: a replica decided alone at the default settings", suspended)
			}
			if admitted > 30 || admitted < 27 {
				t.Fatalf("admitted %d of 90 over three replicas against rpm 30; want at most 30 and at least 27", admitted)
			}
		})
	}

	// A budget spent on replica A refuses the next request on replica C
	// once A's row is folded, published and read by C's accountant.
	t.Run("budget_spent_on_a_refuses_on_c", func(t *testing.T) {
		a := f.Replica(0)
		first, err := call(ctx, a.URL, "/v1/responses")
		if err != nil || first.status != 200 {
			t.Fatalf("the first call on A: %+v %v", first, err)
		}
		for i, rep := range f.Replicas() {
			eventually(ctx, t, fmt.Sprintf("replica %d sees A's spend", i), func() (bool, string) {
				l := fleetMe(ctx, t, rep.URL).limit(t, "fleet_budget")
				n, err := nanos(l.ObservedUSD.USD)
				return err == nil && n > 0, fmt.Sprintf("observed %s", l.ObservedUSD.USD)
			})
		}
		for i, rep := range f.Replicas()[1:] {
			ans, err := call(ctx, rep.URL, "/v1/responses")
			if err != nil || ans.status != 429 || ans.refusedBy != "fleet_budget" {
				t.Fatalf("replica %d after A spent the budget: %+v %v; want 429 by fleet_budget", i+1, ans, err)
			}
		}
	})

	// tpm on store: redis: the reserve comes from a lease, fleet-wide, and
	// the reconcile gives back what the call did not use. Burst 20,000
	// holds one 16,002-token reserve (a prompt and max_tokens 16,000) but
	// not two; the stub answers in 22 tokens.
	t.Run("tpm_reserve_and_reconcile", func(t *testing.T) {
		held := make(chan answer, 1)
		go func() {
			a, err := call(ctx, f.Replica(0).URL, "/v1/messages", "x-stub-delay-ms", "2000")
			if err != nil {
				a.body = err.Error()
			}
			held <- a
		}()
		// The first call's reserve is in Redis (its cell exists) before
		// the second call is sent.
		cell := "tt:{fleet_tpm|tpm|__global|model=claude-3-5-haiku-latest,endpoint=/v1/messages|24h0m0s|gcra}:rate"
		eventually(ctx, t, "the first call's lease is in Redis", func() (bool, string) {
			v, err := r.Do("EXISTS", cell)
			keys, _ := r.Do("KEYS", "*fleet_tpm*")
			return err == nil && v == "1", fmt.Sprintf("EXISTS %s: %s %v (keys %q)", cell, v, err, keys)
		})
		eventually(ctx, t, "the second reserve is refused on another replica while the first is held", func() (bool, string) {
			a, err := call(ctx, f.Replica(1).URL, "/v1/messages")
			if err != nil {
				return false, err.Error()
			}
			if a.status == 200 {
				t.Fatalf("a second 16,002-token reserve was admitted beside the first: %+v", a)
			}
			return a.status == 429 && a.refusedBy == "fleet_tpm", fmt.Sprintf("%d %s", a.status, a.body)
		})
		if a := <-held; a.status != 200 || a.suspended != "" {
			t.Fatalf("the held call: %+v", a)
		}
		eventually(ctx, t, "a reserve fits again once the first call is reconciled", func() (bool, string) {
			a, err := call(ctx, f.Replica(2).URL, "/v1/messages")
			if err != nil {
				return false, err.Error()
			}
			return a.status == 200, fmt.Sprintf("%d %s", a.status, a.body)
		})
	})

	// Reserve mode holds fleet-wide: 64 calls at once over the three
	// replicas, each held 300 ms at the stub, against $0.0001. A call's
	// dearest cost is a quarter of it ($0.0000252: 88 body bytes of input,
	// 20 output tokens) and it costs $0.0000129, so replicas that held
	// only their own calls would spend $0.000155; on leases of the fleet's
	// budget the fleet never spends more than the cap.
	t.Run("reserve_budget_burst_holds_the_cap", func(t *testing.T) {
		body := `{"model":"gpt-4o-mini","max_output_tokens":20,"input":"What is the capital of Germany?"}`
		answers := burst(ctx, t, f.Replicas(), "/v1/responses", body, 64, "x-stub-delay-ms", "300")
		admitted, _, suspended := tally(t, answers, "fleet_reserve")
		if suspended > 0 || admitted < 2 {
			t.Fatalf("%d admitted, %d suspended of 64; want at least the two the budget holds at once, none decided alone", admitted, suspended)
		}
		spent := settledUse(ctx, t, f, "fleet_reserve", true)
		t.Logf("%d of 64 admitted; the fleet spent %d of 100,000 nanodollars", admitted, spent)
		if spent > 100_000 || spent == 0 {
			t.Fatalf("the fleet spent %d nanodollars of a 100,000 cap in reserve mode; want at most the cap", spent)
		}
	})

	// quota_requests 5 with reserve: true: 32 calls at once over three
	// replicas, exactly 5 served.
	t.Run("reserve_quota_requests_exactly_five", func(t *testing.T) {
		body := `{"model":"gpt-4.1-mini","max_output_tokens":8,"input":"hi"}`
		answers := burst(ctx, t, f.Replicas(), "/v1/responses", body, 32, "x-stub-delay-ms", "200")
		admitted, _, suspended := tally(t, answers, "fleet_calls")
		if admitted != 5 || suspended > 0 {
			t.Fatalf("%d of 32 calls at once served against quota_requests 5 in reserve mode (%d suspended); want exactly 5", admitted, suspended)
		}
		if used := settledUse(ctx, t, f, "fleet_calls", false); used != 5 {
			t.Fatalf("the fleet's quota count settled at %d; want 5", used)
		}
	})

	// quota_tokens 2,000 with reserve: true: a call holds its most tokens
	// (its body's bytes and its output maximum) and the last ones are
	// lowered to what is left: the fleet never uses more than 2,000.
	t.Run("reserve_quota_tokens_burst_holds_the_cap", func(t *testing.T) {
		body := `{"model":"gpt-4.1-nano","max_output_tokens":200,"input":"What is the capital of Germany?"}`
		answers := burst(ctx, t, f.Replicas(), "/v1/responses", body, 32, "x-stub-delay-ms", "200")
		admitted, _, suspended := tally(t, answers, "fleet_tokens")
		if admitted == 0 || suspended > 0 {
			t.Fatalf("%d admitted, %d suspended of 32", admitted, suspended)
		}
		used := settledUse(ctx, t, f, "fleet_tokens", false)
		t.Logf("%d of 32 admitted; the fleet used %d of 2,000 tokens", admitted, used)
		if used > 2000 {
			t.Fatalf("the fleet used %d tokens of a 2,000 quota in reserve mode; want at most the quota", used)
		}
	})

	// store: share divides by the fleet's live replicas, counted from the
	// heartbeats every accountant writes into Redis for the replicas that
	// polled it with the internal token; a poll without it counts nothing.
	t.Run("share_counts_the_fleet", func(t *testing.T) {
		for i := 0; i < 5; i++ {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.Replica(1).AccountantURL+"/tt/internal/v1/sync?replica=made-up-"+fmt.Sprint(i), nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 401 {
				t.Fatalf("a sync poll without the internal token: %d, want 401", resp.StatusCode)
			}
		}
		for i, rep := range f.Replicas() {
			eventually(ctx, t, fmt.Sprintf("replica %d's accountant counts the fleet", i), func() (bool, string) {
				n := fleetReplicas(ctx, t, rep.AccountantURL, f.InternalToken)
				return n == 3, fmt.Sprintf("replicas %d", n)
			})
		}
	})

	// Redis loses its data (FLUSHALL) with the reserve budget spent near its
	// cap: the holds and leases come back from the replicas and the totals
	// from the ledgers before Redis grants again (until then each replica
	// decides within its share, saying suspended), so a burst after the
	// loss does not spend another cap.
	t.Run("redis_flushed_reserve_holds_the_cap", func(t *testing.T) {
		if _, err := r.Do("FLUSHALL"); err != nil {
			t.Fatal(err)
		}
		body := `{"model":"gpt-4o-mini","max_output_tokens":20,"input":"What is the capital of Germany?"}`
		answers := burst(ctx, t, f.Replicas(), "/v1/responses", body, 32, "x-stub-delay-ms", "300")
		admitted, _, suspended := tally(t, answers, "fleet_reserve")
		spent := settledUse(ctx, t, f, "fleet_reserve", true)
		t.Logf("after FLUSHALL: %d of 32 admitted (%d suspended); the fleet spent %d of 100,000 nanodollars", admitted, suspended, spent)
		// Within the replicas' shares while the leases are counted again:
		// at most a third of what was left each, never another cap.
		if spent > 100_000 {
			t.Fatalf("after Redis lost its data the fleet spent %d nanodollars of a 100,000 cap in reserve mode", spent)
		}
	})

	// Redis killed mid-burst: the replicas go on inside their leases, and
	// past them within their shares, saying suspended; the fleet admits at
	// most the amount and a share (ceil(30/3) = 10) per replica. Restarted
	// empty, the fleet decides again within seconds, exactly.
	t.Run("redis_killed_mid_burst_then_restarted_empty", func(t *testing.T) {
		keys := make([]string, 3)
		for i, rep := range f.Replicas() {
			keys[i] = rep.DemoKey
		}
		var mu sync.Mutex
		var answers []answer
		send := func(n int) {
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rep := f.Replica(i % 3)
					a, err := callBody(ctx, rep.URL, "/v1/messages", `{"model":"claude-3-haiku-20240307","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`,
						"Authorization", "Bearer "+keys[i%3])
					if err != nil {
						a.body = err.Error()
					}
					mu.Lock()
					answers = append(answers, a)
					mu.Unlock()
				}()
			}
			wg.Wait()
		}
		send(12)
		r.Kill()
		send(60)
		admitted, _, suspended := 0, 0, 0
		for i, a := range answers {
			switch {
			case a.status == 200:
				admitted++
			case a.status != 429 || a.refusedBy != "team_rpm":
				t.Fatalf("answer %d: %d %s", i, a.status, a.body)
			}
			if strings.Contains(a.suspended, "team_rpm") {
				suspended++
			}
		}
		t.Logf("Redis killed after 12 calls: %d of 72 admitted, %d suspended", admitted, suspended)
		if admitted > 30+3*10 {
			t.Fatalf("%d admitted with Redis down; want at most the amount and a share per replica (60)", admitted)
		}
		if suspended == 0 {
			t.Fatal("no answer said suspended with Redis down")
		}
		notSuspended := 0
		for _, a := range answers {
			if a.status == 200 && !strings.Contains(a.suspended, "team_rpm") {
				notSuspended++
			}
		}
		if notSuspended > 30 {
			t.Fatalf("%d answers admitted without saying suspended; the fleet's leases hold at most 30", notSuspended)
		}
		// /tt/v1/me says so.
		for i, rep := range f.Replicas() {
			eventually(ctx, t, fmt.Sprintf("replica %d's /tt/v1/me says suspended", i), func() (bool, string) {
				doc := fleetMeKey(ctx, t, rep.URL, keys[i])
				for _, l := range doc.Limits {
					if l.LimitID == "team_rpm" {
						return l.Suspended, fmt.Sprintf("%+v", l)
					}
				}
				return false, "no team_rpm"
			})
		}

		r.Restart(t, redistest.Empty)
		for i, rep := range f.Replicas() {
			eventually(ctx, t, fmt.Sprintf("replica %d decides on the fleet again", i), func() (bool, string) {
				ans, err := call(ctx, rep.URL, "/v1/embeddings")
				if err != nil {
					return false, err.Error()
				}
				return ans.suspended == "", fmt.Sprintf("%d %q", ans.status, ans.suspended)
			})
		}
		// Exact again: rpm_sliding's window was lost with Redis's data and
		// starts over; a burst admits 30 at most, none suspended.
		answers2 := burst(ctx, t, f.Replicas(), "/v1/completions", fleetBodies["/v1/completions"], 60)
		a2, _, s2 := tally(t, answers2, "rpm_fixed")
		t.Logf("after the restart: %d of 60 admitted, %d suspended", a2, s2)
		if a2 > 30 || s2 > 0 {
			t.Fatalf("after Redis came back empty: %d admitted (%d suspended); want at most 30, none suspended", a2, s2)
		}
	})
}

// fleetMeKey is /tt/v1/me of replica base with key.
func fleetMeKey(ctx context.Context, t testing.TB, base, key string) meDoc {
	t.Helper()
	var doc meDoc
	meAt(ctx, t, base, key, &doc)
	return doc
}

// TestFleetTwoReplicas: two replicas, 60 calls at once against rpm 30
// store: redis: at most 30, at least 27 admitted, none suspended.
func TestFleetTwoReplicas(t *testing.T) {
	r := redistest.Start(t)
	cfg := strings.Replace(fleetConfig, `redis: { addr: "127.0.0.1:1" }`, `redis: { addr: "127.0.0.1:1", key_prefix: two }`, 1)
	f := fleettest.Start(t, fleettest.Options{Replicas: 2, Config: writeConfig(t, cfg), Redis: r.Addr, NoControl: true})
	ctx := testContext(t)
	answers := burst(ctx, t, f.Replicas(), "/v1/chat/completions", fleetBodies["/v1/chat/completions"], 60)
	admitted, _, suspended := tally(t, answers, "rpm_gcra")
	t.Logf("two replicas: %d of 60 admitted, %d suspended", admitted, suspended)
	if admitted > 30 || admitted < 27 || suspended > 0 {
		t.Fatalf("admitted %d of 60 over two replicas against rpm 30 (%d suspended); want at most 30, at least 27, none suspended", admitted, suspended)
	}
}

// fleetReplicas is the replica count an accountant's sync answer gives
// (what store: share divides by).
func fleetReplicas(ctx context.Context, t testing.TB, acct, token string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, acct+"/tt/internal/v1/sync", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct {
		Replicas int `json:"replicas"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || resp.StatusCode != 200 {
		t.Fatalf("sync: %d %v", resp.StatusCode, err)
	}
	return s.Replicas
}
