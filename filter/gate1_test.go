package filter_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
	"github.com/tokentriage/tokentriage/wasmtest"
)

// tally counts answers, admitted and refused; any other status is an
// error.
type tally struct{ ok, refused atomic.Int64 }

func (c *tally) add(t *testing.T, resp wasmtest.Response) {
	switch resp.Status {
	case 200:
		c.ok.Add(1)
	case 429:
		c.refused.Add(1)
	default:
		t.Errorf("status %d: %s", resp.Status, resp.Body)
	}
}

// TestRPMRaceAdmitsExactlyN: an rpm limit of N admits exactly N in its
// window when four VMs race from many goroutines, for every algorithm, and
// N again once the window has passed.
func TestRPMRaceAdmitsExactlyN(t *testing.T) {
	const n, callers = 25, 100
	for _, alg := range []string{"gcra", "fixed_window", "sliding_window", "token_bucket"} {
		t.Run(alg, func(t *testing.T) {
			lim := fmt.Sprintf(`{"id":"global_rpm","attach":{"node":"__global"},"type":"rpm","amount":%d,"period":"1m","algorithm":%q}`, n, alg)
			r := newRig(t, rigOptions{governance: gov(lim), workers: 4})
			for round := 0; round < 2; round++ {
				var c tally
				parallel(callers, func(i int) { c.add(t, r.do(req{method: "GET", path: "/v1/models"})) })
				ok, refused := &c.ok, &c.refused
				if ok.Load() != n || refused.Load() != callers-n {
					t.Errorf("round %d: %d admitted and %d refused of %d, want exactly %d admitted", round, ok.Load(), refused.Load(), callers, n)
				}
				// Two windows later every algorithm has a full window again.
				r.step(2 * time.Minute)
			}
			if got := r.metric("tokentriage.refused.rpm"); got != 2*(callers-n) {
				t.Errorf("tokentriage.refused.rpm = %d, want %d", got, 2*(callers-n))
			}
		})
	}
}

// TestConcurrencyCapRace: racing slow requests from many goroutines over
// four VMs never exceed the cap, and every lease comes back: after served
// requests, refusals, client resets before and during the response, and
// local replies at gate 2.
func TestConcurrencyCapRace(t *testing.T) {
	const cap, callers = 3, 24
	lims := `{"id":"user_concurrency","attach":{"level":"user"},"type":"concurrency","amount":3},
		{"id":"global_concurrency","attach":{"node":"__global"},"type":"concurrency","amount":5}`
	up := newGatedUpstream(nil)
	r := newRig(t, rigOptions{governance: gov(lims, `,"require_key":true`), keys: []testKey{dev1Key, dev2Key}, workers: 4,
		upstream: up, extra: []string{`"max_body_bytes":4096`}})
	up.next = r.stub
	gauges := func() (user, global float64) {
		return r.meLimit(dev1Key, "user_concurrency")["observed"].(float64), r.meLimit(dev1Key, "global_concurrency")["observed"].(float64)
	}

	// Wave 1: everybody at once while the upstream holds the admitted.
	var c tally
	ok, refused := &c.ok, &c.refused
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.add(t, r.chat(dev1Key, chatGermany))
		}()
	}
	waitFor(t, "every caller admitted or refused", func() bool { return up.inflight.Load()+refused.Load() == callers })
	if got := up.inflight.Load(); got != cap {
		t.Errorf("%d in flight at the upstream, want the cap %d", got, cap)
	}
	if u, g := gauges(); u != cap || g != cap {
		t.Errorf("gauges while held: user %v global %v, want %d", u, g, cap)
	}
	up.open()
	wg.Wait()
	if ok.Load() != cap {
		t.Errorf("%d served, want %d", ok.Load(), cap)
	}
	if u, g := gauges(); u != 0 || g != 0 {
		t.Errorf("gauges after wave 1: user %v global %v, want 0", u, g)
	}

	// Wave 2: slow requests (the stub's own delay) from two keys, in
	// several rounds; the upstream never sees more than the global cap.
	up.peak.Store(0)
	parallel(callers, func(i int) {
		k := dev1Key
		if i%2 == 1 {
			k = dev2Key
		}
		resp := r.chat(k, chatGermany, "X-Stub-Delay-Ms", "20")
		if resp.Status != 200 && resp.Status != 429 {
			t.Errorf("status %d: %s", resp.Status, resp.Body)
		}
	})
	if p := up.peak.Load(); p > 5 {
		t.Errorf("peak in flight %d, above the global cap 5", p)
	}
	if u, g := gauges(); u != 0 || g != 0 {
		t.Errorf("gauges after wave 2: user %v global %v, want 0", u, g)
	}

	// Client resets: while held in the upstream, and mid-stream.
	up.close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan wasmtest.Response)
	go func() { done <- r.do(req{path: "/v1/chat/completions", key: dev1Key, body: chatGermany, ctx: ctx}) }()
	waitFor(t, "the request in the upstream", func() bool { return up.inflight.Load() == 1 })
	if u, _ := gauges(); u != 1 {
		t.Errorf("user gauge with one held: %v", u)
	}
	cancel()
	if resp := <-done; !resp.Reset && resp.Status != 0 {
		t.Logf("reset while held: status %d", resp.Status)
	}
	up.open()
	waitFor(t, "the reset to settle", func() bool { u, g := gauges(); return u == 0 && g == 0 })

	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		done <- r.do(req{path: "/v1/chat/completions", key: dev1Key, ctx: ctx,
			body:    chatBody("gpt-4o-mini", germany, `,"stream":true`),
			headers: map[string]string{"X-Stub-Chunk-Delay-Ms": "30", "X-Stub-Completion-Tokens": "200"}})
	}()
	waitFor(t, "the stream to start", func() bool { u, _ := gauges(); return u == 1 })
	time.Sleep(60 * time.Millisecond) // a few events in
	cancel()
	<-done
	waitFor(t, "the mid-stream reset to settle", func() bool { u, g := gauges(); return u == 0 && g == 0 })

	// Local replies at gate 2 after gate 1 took both leases.
	for _, q := range []req{
		{path: "/v1/chat/completions", key: dev1Key, body: `{"model":`},                                                     // 400
		{path: "/v1/chat/completions", key: dev1Key, body: chatBody("m", strings.Repeat("y", 5000))},                        // 413
		{path: "/v1/chat/completions", key: dev1Key, chunks: []string{`{"model":"gpt-4o",`, `"x":1`}},                       // 400 in chunks
		{path: "/v1/chat/completions", key: dev1Key, body: chatGermany, headers: map[string]string{"X-Stub-Status": "500"}}, // upstream error
	} {
		r.do(q)
	}
	if u, g := gauges(); u != 0 || g != 0 {
		t.Errorf("gauges after local replies: user %v global %v, want 0", u, g)
	}
	// The gauges in shared data hold no live entry either.
	for _, id := range []string{"user_concurrency|concurrency|org:acme/team:ml/user:dev1|||", "global_concurrency|concurrency|__global|||"} {
		if v, _, ok := r.h.SharedData(id); !ok || len(v) != 1 || v[0] != 0 {
			t.Errorf("gauge %s in shared data = %x, want one byte 0 (no entries)", id, v)
		}
	}
}

// TestGate2RefusalKeepsRPMReturnsLeases: a refusal at gate 2 hands back
// gate 1's lease and the tpm reserve; the rpm arrival stays counted.
func TestGate2RefusalKeepsRPMReturnsLeases(t *testing.T) {
	lims := `{"id":"user_concurrency","attach":{"level":"user"},"type":"concurrency","amount":1},
		{"id":"team_rpm","attach":{"level":"team"},"type":"rpm","amount":10,"period":"1m"},
		{"id":"team_tpm","attach":{"level":"team"},"type":"tpm","amount":20000,"period":"1m"},
		{"id":"org_monthly_budget","attach":{"level":"org"},"type":"budget_usd","amount_usd":0.000001,"period":"month"}`
	r := newRig(t, rigOptions{governance: gov(lims, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true, acct: seedSnapshot})
	r.sync()
	for i := 1; i <= 3; i++ {
		resp := r.chat(dev1Key, chatGermany)
		mustStatus(t, resp, 429)
		if by := resp.Headers.Get("X-Tt-Refused-By"); by != "org_monthly_budget" {
			t.Fatalf("refused by %s", by)
		}
		if got := r.meLimit(dev1Key, "team_rpm"); got["observed"] != float64(i) {
			t.Errorf("after %d gate-2 refusals team_rpm observed %v, want %d", i, got["observed"], i)
		}
		if got := r.meLimit(dev1Key, "user_concurrency"); got["observed"] != 0.0 {
			t.Errorf("after %d gate-2 refusals user_concurrency observed %v, want 0", i, got["observed"])
		}
		if got := r.meLimit(dev1Key, "team_tpm"); got["remaining"] != 20000.0 {
			t.Errorf("after %d gate-2 refusals team_tpm remaining %v, want 20000", i, got["remaining"])
		}
	}
	// The rows say who refused, and carry no usage.
	r.step(time.Second)
	rows := r.acct.ledger()
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	want := ledger.Ref{LimitID: "org_monthly_budget", LimitType: "budget_usd", Node: "org:acme"}
	for _, row := range rows {
		if row.Decision != ledger.Refused || row.ErrorType != "budget_exceeded" || row.Status != 429 ||
			row.RefusedBy == nil || *row.RefusedBy != want || row.Usage != (ledger.Usage{}) || row.Model != "gpt-4o-mini" {
			t.Errorf("refused row: %+v refused_by %+v", row, row.RefusedBy)
		}
	}
}

// TestAnonymousResolvesToGlobal: with require_key off, traffic without a
// key resolves to [__global]: a limit pinned there counts it, templates do
// not.
func TestAnonymousResolvesToGlobal(t *testing.T) {
	lims := `{"id":"global_rpm","attach":{"node":"__global"},"type":"rpm","amount":2,"period":"1m"},
		{"id":"org_rpm","attach":{"level":"org"},"type":"rpm","amount":1,"period":"1m"}`
	r := newRig(t, rigOptions{governance: gov(lims), keys: []testKey{dev1Key}, accountant: true})
	mustStatus(t, r.chat(testKey{}, chatGermany), 200)
	resp := r.chat(testKey{}, chatGermany)
	mustStatus(t, resp, 200)
	if got := resp.Headers.Get("X-Ratelimit-Remaining-Requests"); got != "0" {
		t.Errorf("X-Ratelimit-Remaining-Requests %q, want 0 (global_rpm)", got)
	}
	resp = r.chat(testKey{}, chatGermany)
	mustStatus(t, resp, 429)
	if by := resp.Headers.Get("X-Tt-Refused-By"); by != "global_rpm" {
		t.Errorf("refused by %s, want global_rpm", by)
	}
	for _, k := range r.h.SharedDataKeys() {
		if strings.HasPrefix(k, "org_rpm|") {
			t.Errorf("anonymous traffic created the template's counter %s", k)
		}
	}
	r.step(time.Second)
	for _, row := range r.acct.ledger() {
		if row.KID != "" || row.Node != "" {
			t.Errorf("anonymous row names kid %q node %q", row.KID, row.Node)
		}
	}
}

// TestVirtualKeyNeverReachesUpstream: the key is removed from
// Authorization and x-api-key; a provider key in Authorization is kept.
func TestVirtualKeyNeverReachesUpstream(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamRPM, `,"require_key":true`), keys: []testKey{dev1Key}})
	check := func(what string) {
		t.Helper()
		last, ok := r.stub.Last()
		if !ok {
			t.Fatalf("%s: nothing reached the upstream", what)
		}
		for k, vs := range last.Header {
			for _, v := range vs {
				if strings.Contains(v, dev1Key.key) || strings.Contains(v, "tt-vk_") {
					t.Errorf("%s: the upstream saw %s: %s", what, k, v)
				}
			}
		}
		if strings.Contains(string(last.Body), "tt-vk_") {
			t.Errorf("%s: the upstream saw the key in the body", what)
		}
	}
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	check("authorization")
	mustStatus(t, r.do(req{path: "/v1/messages", key: dev1Key, apiKey: true, body: messagesBody("claude-sonnet-4-20250514", germany)}), 200)
	check("x-api-key")
	// The key in x-api-key and a provider key in Authorization: the provider
	// key goes on, the virtual key does not.
	mustStatus(t, r.do(req{path: "/v1/messages", key: dev1Key, apiKey: true, body: messagesBody("claude-sonnet-4-20250514", germany),
		headers: map[string]string{"Authorization": "Bearer sk-provider"}}), 200)
	check("x-api-key beside a provider key")
	if last, _ := r.stub.Last(); last.Header.Get("Authorization") != "Bearer sk-provider" {
		t.Errorf("the provider's key was dropped: %q", last.Header.Get("Authorization"))
	}
}

// TestPostures: shadow records the would-refuse and admits, soft admits a
// breach and records it, off is inert, and each is on the ledger row.
func TestPostures(t *testing.T) {
	lims := `{"id":"shadow_rpm","attach":{"level":"team"},"type":"rpm","amount":1,"period":"1m","posture":{"mode":"shadow"}},
		{"id":"soft_conc","attach":{"level":"user"},"type":"concurrency","amount":1,"posture":{"enforce":"soft"}},
		{"id":"off_rpm","attach":{"level":"user"},"type":"rpm","amount":1,"period":"1m","posture":{"mode":"off"}}`
	up := newGatedUpstream(nil)
	r := newRig(t, rigOptions{governance: gov(lims, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true, upstream: up})
	up.next = r.stub
	up.open()
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	resp := r.chat(dev1Key, chatGermany) // shadow_rpm would refuse
	mustStatus(t, resp, 200)
	shadowID := resp.Headers.Get("X-Tt-Request-Id")

	// Hold one request so soft_conc is full, then breach it: the second is
	// admitted over the cap and held too.
	up.close()
	done := make(chan struct{})
	go func() { defer close(done); r.chat(dev1Key, chatGermany) }()
	waitFor(t, "one request held", func() bool { return up.inflight.Load() == 1 })
	breach := make(chan wasmtest.Response)
	go func() { breach <- r.chat(dev1Key, chatGermany) }()
	waitFor(t, "the breach held", func() bool { return up.inflight.Load() == 2 })
	up.open()
	resp = <-breach
	<-done
	mustStatus(t, resp, 200)
	softID := resp.Headers.Get("X-Tt-Request-Id")

	for _, k := range r.h.SharedDataKeys() {
		if strings.HasPrefix(k, "off_rpm|") {
			t.Errorf("a mode-off limit created its counter %s", k)
		}
	}
	r.step(time.Second)
	shadow, ok1 := r.acct.row(shadowID)
	soft, ok2 := r.acct.row(softID)
	if !ok1 || !ok2 {
		t.Fatalf("rows missing: shadow %v soft %v", ok1, ok2)
	}
	if shadow.Decision != ledger.ShadowRefused || len(shadow.Shadow) != 1 || shadow.Shadow[0].LimitID != "shadow_rpm" {
		t.Errorf("shadow row: decision %s shadow %+v", shadow.Decision, shadow.Shadow)
	}
	if soft.Decision != ledger.SoftBreach || len(soft.Breached) != 1 || soft.Breached[0].LimitID != "soft_conc" {
		t.Errorf("soft row: decision %s breached %+v", soft.Decision, soft.Breached)
	}
	if got := r.metric("tokentriage.shadow_refused"); got < 1 {
		t.Errorf("tokentriage.shadow_refused = %d", got)
	}
	if got := r.metric("tokentriage.soft_breach"); got != 1 {
		t.Errorf("tokentriage.soft_breach = %d, want 1", got)
	}
	// The gauge tracks what is in flight, the soft breach included, and
	// comes back to 0.
	if got := r.meLimit(dev1Key, "soft_conc"); got["observed"] != 0.0 {
		t.Errorf("soft_conc observed %v after all finished", got["observed"])
	}
}

// TestModeOffEverywhereIsInert: governance enabled with only mode-off
// limits behaves as no limit at all.
func TestModeOffEverywhereIsInert(t *testing.T) {
	lim := `{"id":"off_rpm","attach":{"node":"__global"},"type":"rpm","amount":1,"period":"1m","posture":{"mode":"off"}}`
	r := newRig(t, rigOptions{governance: gov(lim)})
	for i := 0; i < 5; i++ {
		resp := r.chat(testKey{}, chatGermany)
		mustStatus(t, resp, 200)
		if resp.Headers.Get("Ratelimit-Policy") != "" {
			t.Errorf("a mode-off limit disclosed a policy: %v", resp.Headers)
		}
	}
}

// TestEndpointSpellings: every spelling of a governed path that reaches
// the same provider endpoint (a trailing slash, doubled slashes, "."
// segments, a query string) is that endpoint to limits matched on it, to
// a key's endpoint scope and on the ledger row.
func TestEndpointSpellings(t *testing.T) {
	scoped := dev2Key
	scoped.scopes = `{"endpoints":["/v1/chat/completions"]}`
	lim := `{"id":"chat_rpm","attach":{"level":"user"},"type":"rpm","amount":100,"period":"1m","match":{"endpoint":"/v1/chat/completions"}}`
	r := newRig(t, rigOptions{governance: gov(lim, `,"require_key":true`), keys: []testKey{dev1Key, scoped}, accountant: true})
	spellings := []string{"/v1/chat/completions", "/v1/chat/completions/", "//v1/chat/completions", "/v1//chat/completions", "/v1/./chat/completions", "/v1/x/../chat/completions?a=b"}
	for i, p := range spellings {
		for _, k := range []testKey{dev1Key, scoped} {
			// The stub routes only the plain spelling (404 for the rest, as
			// a provider that does not clean paths would); what matters is
			// that the filter admitted each one as the chat endpoint.
			resp := r.do(req{path: p, key: k, body: chatBody("gpt-4o-mini", germany)})
			if rt := resp.Headers.Get("X-Tt-Refusal-Type"); rt != "" || (resp.Status != 200 && resp.Status != 404) {
				t.Errorf("%s with %s: %d %s", p, k.kid, resp.Status, resp.Body)
			}
		}
		if got := r.meLimit(dev1Key, "chat_rpm")["observed"]; got != float64(i+1) {
			t.Errorf("after %s: chat_rpm observed %v, want %d", p, got, i+1)
		}
	}
	r.step(500 * time.Millisecond)
	for _, row := range r.acct.ledger() {
		if row.Endpoint != "/v1/chat/completions" {
			t.Errorf("row %s: endpoint %q, want /v1/chat/completions", row.RequestID, row.Endpoint)
		}
	}
}

// TestGovernedEndpointUnderOddPrefix: a governed endpoint under a route
// prefix that a server on the way may decode or cut (a path parameter, an
// escaped "?", "#" or dot segment, a backslash) could be routed to another
// endpoint (/v1/batches;/v1/chat/completions to POST /v1/batches),
// governed as one small chat call: it is refused as another spelling
// before it reaches the upstream, while a plain prefix is the endpoint.
func TestGovernedEndpointUnderOddPrefix(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamRPM, `,"require_key":true`), keys: []testKey{dev1Key}})
	for _, p := range []string{
		"/v1/batches;/v1/chat/completions",
		"/v1/batches%3F/v1/chat/completions",
		"/v1/batches%23/v1/responses",
		"/v1/batches/%2e%2e/v1/embeddings",
		"/v1/files\\/v1/messages",
	} {
		before := r.stub.Served()
		resp := r.do(req{path: p, key: dev1Key, body: chatBody("gpt-4o-mini", germany)})
		if resp.Status != 400 || !strings.Contains(string(resp.Body), "another spelling") {
			t.Errorf("%s: %d %s; want 400, another spelling of a governed endpoint", p, resp.Status, resp.Body)
		}
		if r.stub.Served() != before {
			t.Errorf("%s reached the upstream", p)
		}
	}
	if resp := r.do(req{path: "/openai/v1/chat/completions", key: dev1Key, body: chatBody("gpt-4o-mini", germany)}); resp.Headers.Get("X-Tt-Refusal-Type") != "" {
		t.Errorf("/openai/v1/chat/completions: %d %s", resp.Status, resp.Body)
	}
}

// TestTwoCredentials: a request naming two different keys, in two
// Authorization headers or in Authorization and x-api-key, is refused
// whichever order they come in; the same key twice is one key.
func TestTwoCredentials(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamRPM, `,"require_key":true`), keys: []testKey{dev1Key, dev2Key}})
	send := func(h http.Header) wasmtest.Response {
		h.Set("Content-Type", "application/json")
		return r.h.Do(wasmtest.Request{Method: "POST", Path: "/v1/chat/completions", Headers: h,
			BodyChunks: [][]byte{[]byte(chatGermany)}})
	}
	for _, h := range []http.Header{
		{"Authorization": {"Bearer " + dev1Key.key, "Bearer " + dev2Key.key}},
		{"Authorization": {"Bearer " + dev2Key.key, "Bearer " + dev1Key.key}},
		{"Authorization": {"Bearer foo", "Bearer " + dev1Key.key}},
		{"Authorization": {"Bearer " + dev1Key.key}, "X-Api-Key": {dev2Key.key}},
	} {
		resp := send(h)
		if resp.Status != 401 || !strings.Contains(string(resp.Body), "two different credentials") {
			t.Errorf("%v: %d %s", h, resp.Status, resp.Body)
		}
	}
	for _, h := range []http.Header{
		{"Authorization": {"Bearer " + dev1Key.key, "Bearer " + dev1Key.key}},
		{"Authorization": {"Bearer " + dev1Key.key}, "X-Api-Key": {dev1Key.key}},
	} {
		if resp := send(h); resp.Status != 200 {
			t.Errorf("%v: %d %s", h, resp.Status, resp.Body)
		}
	}
}

// TestNonPostOnGovernedPath: GET on a governed path (OpenAI's list of
// stored chat completions), HEAD and OPTIONS carry no generation request:
// they are passthrough calls, served for a key that may pass through and
// refused by scope for one that may not, never a 400 about a body.
func TestNonPostOnGovernedPath(t *testing.T) {
	pass := dev2Key
	pass.scopes = `{"allow_passthrough":true}`
	r := newRig(t, rigOptions{governance: gov(limTeamRPM, `,"require_key":true`), keys: []testKey{dev1Key, pass}})
	for _, m := range []string{"GET", "HEAD", "OPTIONS"} {
		resp := r.do(req{method: m, path: "/v1/chat/completions?limit=5", key: pass})
		if resp.Headers.Get("X-Tt-Refusal-Type") != "" {
			t.Errorf("%s with a passthrough key: %d %s", m, resp.Status, resp.Body)
		}
		resp = r.do(req{method: m, path: "/v1/chat/completions", key: dev1Key})
		if resp.Status != 403 || resp.Headers.Get("X-Tt-Refusal-Type") != "scope_denied" {
			t.Errorf("%s without passthrough: %d %s, want 403 scope_denied", m, resp.Status, resp.Body)
		}
	}
}

// TestPassthroughWithEndpointsScope: a key scoped to some provider
// endpoints that may also pass through reaches passthrough paths; the
// endpoints scope limits only the governed ones.
func TestPassthroughWithEndpointsScope(t *testing.T) {
	k := dev2Key
	k.scopes = `{"endpoints":["/v1/chat/completions"],"allow_passthrough":true}`
	r := newRig(t, rigOptions{governance: gov(limTeamRPM, `,"require_key":true`), keys: []testKey{k}})
	if resp := r.do(req{method: "GET", path: "/v1/models", key: k}); resp.Headers.Get("X-Tt-Refusal-Type") != "" {
		t.Errorf("GET /v1/models: %d %s", resp.Status, resp.Body)
	}
	if resp := r.do(req{path: "/v1/embeddings", key: k, body: `{"model":"text-embedding-3-small","input":"x"}`}); resp.Status != 403 {
		t.Errorf("a governed endpoint outside the scope: %d, want 403", resp.Status)
	}
}

// TestGate1ResolutionFollowsTheRuntimePlane: a key's gate-1 instances are
// kept from one of its requests to the next (resolveGate), and a sync
// that makes its team a runtime node brings the team's rpm limit to the
// key's very next request, on every VM.
func TestGate1ResolutionFollowsTheRuntimePlane(t *testing.T) {
	lim := `{"id":"team_rpm","attach":{"level":"team"},"type":"rpm","amount":2,"period":"1m"}`
	k := newTestKey("vk_rtteam000001", "org:acme/team:rt/user:u1")
	r := newRig(t, rigOptions{governance: gov(lim, `,"require_key":true`), accountant: true, acct: func(a *fakeAccountant) {
		a.setKeys("k1", syncwire.Key{KID: k.kid, SHA256: vkey.Hash(k.key), Owner: k.owner})
	}})
	r.sync()
	for vm := 1; vm <= 2; vm++ {
		q := req{path: "/v1/chat/completions", key: k, body: chatGermany, vm: vm}
		for i := 0; i < 3; i++ {
			mustStatus(t, r.do(q), 200) // no team node yet: nothing limits the key
		}
	}
	r.acct.setRuntime("rt1", []string{k.owner})
	r.sync()
	mustStatus(t, r.do(req{path: "/v1/chat/completions", key: k, body: chatGermany, vm: 1}), 200)
	mustStatus(t, r.do(req{path: "/v1/chat/completions", key: k, body: chatGermany, vm: 2}), 200)
	resp := r.do(req{path: "/v1/chat/completions", key: k, body: chatGermany, vm: 1})
	mustStatus(t, resp, 429)
	if !strings.Contains(string(resp.Body), "team_rpm") {
		t.Errorf("refused by something else than team_rpm: %s", resp.Body)
	}
}
