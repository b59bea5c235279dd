package filter_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// The limits of the sandbox the seeds' captures were taken on (seeds 000,
// 002 and 004): a millionth-of-a-dollar org budget, a user concurrency of
// 10, a team rpm of 3 and a team tpm of 20,000.
const (
	limOrgBudget       = `{"id":"org_monthly_budget","attach":{"level":"org"},"type":"budget_usd","amount_usd":0.000001,"period":"month"}`
	limUserConcurrency = `{"id":"user_concurrency","attach":{"level":"user"},"type":"concurrency","amount":10}`
	limTeamRPM         = `{"id":"team_rpm","attach":{"level":"team"},"type":"rpm","amount":3,"period":"1m"}`
	limTeamTPM         = `{"id":"team_tpm","attach":{"level":"team"},"type":"tpm","amount":20000,"period":"1m"}`

	idOrgBudget = "org_monthly_budget|budget_usd|org:acme||month|"
)

var seedSandbox = gov(strings.Join([]string{limOrgBudget, limUserConcurrency, limTeamRPM, limTeamTPM}, ","), `,"require_key":true`)

// seedSnapshot is the org's spend in the captures: 0.0000126 USD.
func seedSnapshot(a *fakeAccountant) {
	a.setSnapshot("s1", syncwire.Entry{ID: idOrgBudget, PeriodStart: monthStart(), Value: 12_600})
}

// TestSeedBudgetRefusal reproduces seed 000's budget_exceeded capture: the
// snapshot arrives from the accountant by sync, and the 429 carries the
// calendar's reset, observed 0.0000126 against 0.000001, and the
// enforcement block with its bound.
func TestSeedBudgetRefusal(t *testing.T) {
	r := newRig(t, rigOptions{governance: seedSandbox, keys: []testKey{dev1Key}, accountant: true, acct: seedSnapshot})
	r.sync()
	if !r.clock.Now().Equal(t0) {
		t.Fatalf("clock at %v, want t0", r.clock.Now())
	}
	resp := r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 429)
	golden(t, "budget_exceeded", render(t, resp))
}

// TestSeedMe reproduces seed 004's /tt/v1/me after two requests refused by
// the budget: the rpm arrivals stay counted (observed 2 of 3), the tpm
// reserves were handed back, the concurrency gauge is 0.
func TestSeedMe(t *testing.T) {
	r := newRig(t, rigOptions{governance: seedSandbox, keys: []testKey{dev1Key}, accountant: true, acct: seedSnapshot})
	r.sync()
	for i := 0; i < 2; i++ {
		mustStatus(t, r.chat(dev1Key, chatGermany), 429)
	}
	resp := r.me(dev1Key)
	mustStatus(t, resp, 200)
	golden(t, "me", render(t, resp))
}

// TestSeedRPMRefusal reproduces seed 000's rpm capture: 3 a minute, the
// fourth at one instant waits one emission interval, 20 s.
func TestSeedRPMRefusal(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamRPM, `,"require_key":true`), keys: []testKey{dev1Key}})
	for i := 0; i < 3; i++ {
		mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	}
	resp := r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 429)
	golden(t, "rate_limited_rpm", render(t, resp))
}

// TestSeedTPMRefusal: a second 16,391-token reserve does not fit a 20,000
// window; the 429 says rate_limited with limit_type tpm, approximate.
func TestSeedTPMRefusal(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key}})
	// The stub takes long enough that both reserves are held at once.
	mustStatus(t, r.chat(dev1Key, chatGermany, "X-Stub-Completion-Tokens", "16384"), 200)
	resp := r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 429)
	golden(t, "rate_limited_tpm", render(t, resp))
}

// TestUnfittableRefusal: a reserve above the burst can never fit.
func TestUnfittableRefusal(t *testing.T) {
	lim := `{"id":"team_tpm","attach":{"level":"team"},"type":"tpm","amount":16384,"period":"1m"}`
	r := newRig(t, rigOptions{governance: gov(lim, `,"require_key":true`), keys: []testKey{dev1Key}})
	resp := r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 429)
	golden(t, "quota_cost_unfittable", render(t, resp))
	// With max_tokens the same prompt fits.
	mustStatus(t, r.chat(dev1Key, chatBody("gpt-4o-mini", germany, `,"max_tokens":100`)), 200)
}

// TestConcurrencyRefusal reproduces seed 002's concurrency capture with the
// gap closed: observed is the live gauge (2 in flight), not 0.
func TestConcurrencyRefusal(t *testing.T) {
	lim := `{"id":"user_concurrency","attach":{"level":"user"},"type":"concurrency","amount":2}`
	up := newGatedUpstream(nil)
	r := newRig(t, rigOptions{governance: gov(lim, `,"require_key":true`), keys: []testKey{dev1Key}, upstream: up})
	up.next = r.stub
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mustStatus(t, r.chat(dev1Key, chatGermany), 200)
		}()
	}
	waitFor(t, "two requests in the upstream", func() bool { return up.inflight.Load() == 2 })
	resp := r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 429)
	golden(t, "concurrency_exceeded", render(t, resp))
	if got := r.meLimit(dev1Key, "user_concurrency"); got["observed"] != 2.0 || got["remaining"] != 0.0 {
		t.Errorf("/tt/v1/me with two in flight: %v", got)
	}
	up.open()
	wg.Wait()
	if got := r.meLimit(dev1Key, "user_concurrency"); got["observed"] != 0.0 || got["remaining"] != 2.0 {
		t.Errorf("/tt/v1/me once both finished: %v", got)
	}
}

// TestQuotaRefusals: quota_tokens and quota_requests answer
// quota_exhausted with the usage note.
func TestQuotaRefusals(t *testing.T) {
	lims := `{"id":"team_monthly_tokens","attach":{"level":"team"},"type":"quota_tokens","amount":50,"period":"month"},
		{"id":"user_daily_requests","attach":{"level":"user"},"type":"quota_requests","amount":1,"period":"day"}`
	r := newRig(t, rigOptions{governance: gov(lims, `,"require_key":true`), keys: []testKey{dev1Key, searchKey}, accountant: true,
		acct: func(a *fakeAccountant) {
			a.setSnapshot("s1",
				syncwire.Entry{ID: "team_monthly_tokens|quota_tokens|org:acme/team:search||month|", PeriodStart: monthStart(), Value: 60},
				syncwire.Entry{ID: "user_daily_requests|quota_requests|org:acme/team:ml/user:dev1||day|", PeriodStart: dayStart(), Value: 1})
		}})
	r.sync()
	resp := r.chat(searchKey, chatGermany)
	mustStatus(t, resp, 429)
	golden(t, "quota_exhausted_tokens", render(t, resp))
	resp = r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 429)
	golden(t, "quota_exhausted_requests", render(t, resp))
}

// TestRejections covers every refusal that is not a limit breach.
func TestRejections(t *testing.T) {
	closed := `{"id":"ml_daily","attach":{"node":"org:acme/team:ml"},"type":"budget_usd","amount_usd":200,"period":"day","posture":{"fail":"closed"}}`
	scoped := newTestKey("vk_scopedscoped", "org:acme/team:ml/user:dev2").withScopes(
		`{"models":["gpt-4o*"],"providers":["openai"],"endpoints":["/v1/chat/completions","/v1/messages"]}`)
	revoked := newTestKey("vk_revokedrevok", "org:acme/team:ml/user:dev1")
	unknown := newTestKey("vk_unknownunkno", "org:acme/team:ml/user:dev1")
	r := newRig(t, rigOptions{
		governance: gov(closed, `,"require_key":true`),
		keys:       []testKey{dev1Key, scoped},
		accountant: true,
		extra:      []string{`"max_body_bytes":1000`},
		acct: func(a *fakeAccountant) {
			a.setKeys("k1", syncwire.Key{KID: revoked.kid, SHA256: vkey.Hash(revoked.key), Owner: revoked.owner, Revoked: true})
			a.setSnapshot("s0")
		},
	})
	// Before the first sync there is no snapshot: ml_daily is uncheckable.
	resp := r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 503)
	golden(t, "unavailable_no_snapshot", render(t, resp))

	r.sync()
	for _, c := range []struct {
		name   string
		status int
		q      req
	}{
		{"unauthorized_missing", 401, req{path: "/v1/chat/completions", body: chatGermany}},
		{"unauthorized_unknown", 401, req{path: "/v1/chat/completions", key: unknown, body: chatGermany}},
		{"unauthorized_revoked", 401, req{path: "/v1/chat/completions", key: revoked, body: chatGermany}},
		{"unauthorized_foreign", 401, req{path: "/v1/chat/completions", headers: map[string]string{"Authorization": "Bearer sk-proj-abc123"}, body: chatGermany}},
		{"unauthorized_ambiguous", 401, req{path: "/v1/chat/completions", key: dev1Key, headers: map[string]string{"X-Api-Key": dev2Key.key}, body: chatGermany}},
		{"scope_models", 403, req{path: "/v1/chat/completions", key: scoped, body: chatBody("o4-mini", germany)}},
		{"scope_providers", 403, req{path: "/v1/messages", key: scoped, body: messagesBody("gpt-4o", germany)}},
		{"scope_endpoints", 403, req{path: "/v1/embeddings", key: scoped, body: `{"model":"gpt-4o","input":"x"}`}},
		{"scope_passthrough", 403, req{method: "GET", path: "/v1/files", key: scoped}},
		{"invalid_request", 400, req{path: "/v1/chat/completions", key: dev1Key, body: `{"model":"gpt-4o-mini","messages":[`}},
		{"request_encoded", 415, req{path: "/v1/chat/completions", key: dev1Key, headers: map[string]string{"Content-Encoding": "gzip"}, body: chatGermany}},
		{"request_too_large", 413, req{path: "/v1/chat/completions", key: dev1Key, body: chatBody("gpt-4o-mini", strings.Repeat("x", 1000))}},
		{"not_found", 404, req{method: "GET", path: "/tt/v1/nothing", key: dev1Key}},
		{"method_not_allowed", 405, req{method: "POST", path: "/tt/v1/me", key: dev1Key, body: "{}"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := r.do(c.q)
			mustStatus(t, resp, c.status)
			golden(t, c.name, render(t, resp))
		})
	}
	// A snapshot is trusted for 30 s: the accountant stops answering, and
	// past 30 s after its last heartbeat ml_daily is uncheckable again.
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	var last time.Time
	r.acct.set(func(a *fakeAccountant) { a.down, last = true, a.snapshot.GeneratedAt })
	r.step(last.Add(30 * time.Second).Sub(r.clock.Now()))
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	r.step(time.Second)
	resp = r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 503)
	golden(t, "unavailable_stale", render(t, resp))
}
