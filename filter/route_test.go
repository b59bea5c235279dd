package filter_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/filter"
	"github.com/tokentriage/tokentriage/internal/stub"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/wasmtest"
)

// seen is an upstream that records what reached it, then answers as the
// stub does.
type seen struct {
	name string
	stub *stub.Stub
	mu   sync.Mutex
	reqs []seenReq
}

type seenReq struct {
	model, provider []string
	length          int64
}

func newSeen(name string) *seen { return &seen{name: name, stub: stub.New(stub.Options{})} }

func (s *seen) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, seenReq{r.Header.Values("X-Tt-Model"), r.Header.Values("X-Tt-Provider"), r.ContentLength})
	s.mu.Unlock()
	s.stub.ServeHTTP(w, r)
}

func (s *seen) last(t testing.TB) seenReq {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		t.Fatalf("nothing reached %s", s.name)
	}
	return s.reqs[len(s.reqs)-1]
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// A request that gate 2 refuses never reaches the provider when its headers
// wait for gate 2 (hold_headers, on a host that honours a Pause at the
// headers as StopIteration). Without, the headers went upstream at gate 1,
// as Envoy's router sends them, and the refusal resets a request the
// provider saw begin.
func TestRefusedAtGate2NeverReachesProvider(t *testing.T) {
	scoped := newTestKey("vk_scopedscoped", "org:acme/team:ml/user:dev2").withScopes(`{"models":["gpt-4o-mini"]}`)
	for _, headersGo := range []bool{false, true} {
		t.Run("headersGo="+strconv.FormatBool(headersGo), func(t *testing.T) {
			r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{scoped}, headersGo: headersGo})
			resp := r.chat(scoped, chatBody("gpt-4o", germany))
			mustStatus(t, resp, 403)
			if resp.Upstream != headersGo {
				t.Errorf("the refused request went upstream: %v, want %v", resp.Upstream, headersGo)
			}
			resp = r.chat(scoped, chatBody("gpt-4o-mini", germany))
			mustStatus(t, resp, 200)
			if !resp.Upstream {
				t.Error("an admitted request did not go upstream")
			}
		})
	}
}

// With the headers held until gate 2, they leave carrying the model the
// body asks for and the provider it resolved to, and the route is chosen
// again: an Envoy route matching x-tt-model picks the backend per model. A
// client's own x-tt-model never picks one, with or without holding.
func TestRoutingHeadersPickTheBackend(t *testing.T) {
	premium, standard := newSeen("premium"), newSeen("standard")
	routes := []wasmtest.Route{
		{Name: "premium-models", Headers: []wasmtest.HeaderMatch{{Name: "x-tt-model", Prefix: "gpt-4.1"}}, Cluster: "premium"},
		{Name: "default"},
	}
	r := newRig(t, rigOptions{
		governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key},
		upstream: standard, routes: routes,
		clusters: map[string]wasmtest.Cluster{"premium": {Handler: premium}},
	})
	mustStatus(t, r.chat(dev1Key, chatBody("gpt-4.1", germany)), 200)
	if got := premium.last(t); len(got.model) != 1 || got.model[0] != "gpt-4.1" || len(got.provider) != 1 || got.provider[0] != "openai" {
		t.Errorf("premium saw model %q provider %q", got.model, got.provider)
	}
	mustStatus(t, r.chat(dev1Key, chatBody("gpt-4o-mini", germany)), 200)
	if got := standard.last(t); len(got.model) != 1 || got.model[0] != "gpt-4o-mini" {
		t.Errorf("standard saw model %q", got.model)
	}
	// A client naming the premium model in the header, not in its body.
	n := premium.count()
	mustStatus(t, r.chat(dev1Key, chatBody("gpt-4o-mini", germany), "X-Tt-Model", "gpt-4.1-premium", "X-Tt-Provider", "anthropic"), 200)
	if premium.count() != n {
		t.Error("a client's x-tt-model picked the premium backend")
	}
	if got := standard.last(t); len(got.model) != 1 || got.model[0] != "gpt-4o-mini" || len(got.provider) != 1 || got.provider[0] != "openai" {
		t.Errorf("standard saw model %q provider %q, want the body's alone", got.model, got.provider)
	}
	// A body gate 2 rewrote (include_usage) goes with its exact length.
	body := chatBody("gpt-4o-mini", germany, `,"stream":true`)
	mustStatus(t, r.chat(dev1Key, body), 200)
	if got := standard.last(t); got.length <= int64(len(body)) {
		t.Errorf("the rewritten body went with length %d; the client's was %d and include_usage adds to it", got.length, len(body))
	}

	// Without holding, the headers go at gate 1: no routing headers, and a
	// client's own are removed before the route is chosen again.
	premium2, standard2 := newSeen("premium"), newSeen("standard")
	r2 := newRig(t, rigOptions{
		governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key}, headersGo: true,
		upstream: standard2, routes: routes,
		clusters: map[string]wasmtest.Cluster{"premium": {Handler: premium2}},
	})
	mustStatus(t, r2.chat(dev1Key, chatBody("gpt-4o-mini", germany), "X-Tt-Model", "gpt-4.1"), 200)
	if premium2.count() != 0 {
		t.Error("a client's x-tt-model picked the premium backend")
	}
	if got := standard2.last(t); len(got.model) != 0 || got.length != -1 {
		t.Errorf("standard saw model %q length %d; want none, chunked", got.model, got.length)
	}
}

// hold_headers on a host that holds the body back from a filter paused at
// the headers (Envoy without allow_on_headers_stop_iteration) must not hang
// requests: the first one is let go after HoldGrace, with an error naming
// the fix, and the VM stops holding.
func TestHoldOnAHostWithoutStopIteration(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key}, noStopIteration: true, workers: 1})
	done := make(chan wasmtest.Response, 1)
	go func() { done <- r.chat(dev1Key, chatBody("gpt-4o-mini", germany, `,"stream":true`)) }()
	// The clock moves only until the VM has let the request go: stepping
	// on while the answer streams would run into stream_idle_timeout.
	resp := r.stepUntil(done, func() bool { return logged(r.h, "Set allow_on_headers_stop_iteration: true") })
	mustStatus(t, resp, 200)
	if !strings.Contains(string(resp.Body), "[DONE]") {
		t.Errorf("the released request's answer: %s", resp.Body)
	}
	if !logged(r.h, "Set allow_on_headers_stop_iteration: true") {
		t.Errorf("no log names the fix: %v", r.h.Logs())
	}
	// The VM no longer holds: the next request needs no tick to go on.
	mustStatus(t, r.chat(dev1Key, chatBody("gpt-4o-mini", germany)), 200)

	// HoldRetry later it holds one request again to try; this host still
	// holds the body back, so that request too is let go after HoldGrace,
	// and the error is said again.
	r.step(filter.HoldRetry)
	go func() { done <- r.chat(dev1Key, chatBody("gpt-4o-mini", germany)) }()
	resp = r.stepUntil(done, func() bool { return countLogged(r.h, "Set allow_on_headers_stop_iteration: true") >= 2 })
	mustStatus(t, resp, 200)
	if n := countLogged(r.h, "Set allow_on_headers_stop_iteration: true"); n != 2 {
		t.Errorf("the error was logged %d times, want twice (the first stall and the retry's)", n)
	}
	mustStatus(t, r.chat(dev1Key, chatBody("gpt-4o-mini", germany)), 200)
}

// A client that sends a governed request's headers and then nothing for
// HoldGrace looks, to a VM that has not yet seen a held body, like a host
// that holds bodies back: the VM stops holding. It must not stop for good:
// HoldRetry later it holds a request again, that request's body arrives
// (this host honours the knob), and the VM holds from then on.
func TestHoldRecoversFromASlowClient(t *testing.T) {
	up := newSeen("upstream")
	r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key}, workers: 1, upstream: up})
	body, feed := io.Pipe()
	q := httptest.NewRequest("POST", "/v1/chat/completions", body)
	q.Header.Set("Authorization", "Bearer "+dev1Key.key)
	q.Header.Set("Content-Type", "application/json")
	q.ContentLength = -1
	done := make(chan int, 1)
	go func() {
		w := httptest.NewRecorder()
		r.h.ServeHTTP(w, q)
		done <- w.Code
	}()
	for !logged(r.h, "Set allow_on_headers_stop_iteration: true") {
		r.step(time.Second)
	}
	feed.Write([]byte(chatBody("gpt-4o-mini", germany)))
	feed.Close()
	if code := <-done; code != 200 {
		t.Fatalf("the slow client's request: %d", code)
	}
	held := func() bool {
		t.Helper()
		mustStatus(t, r.chat(dev1Key, chatBody("gpt-4o-mini", germany)), 200)
		return len(up.last(t).model) == 1 // x-tt-model: its headers waited for gate 2
	}
	if held() {
		t.Fatal("the VM still held after a request stalled before any held body")
	}
	r.step(filter.HoldRetry)
	if !held() {
		t.Fatal("HoldRetry later the VM did not hold a request to try again")
	}
	for i := 0; i < 3; i++ {
		if !held() {
			t.Fatalf("request %d after the retry's body arrived was not held", i)
		}
	}
}

// stepUntil steps the clock a second at a time while the call answering
// on done is not back and until says no more, then waits for the answer.
// The clock moves only until then: stepping on while an answer streams
// would run into stream_idle_timeout.
func (r *rig) stepUntil(done <-chan wasmtest.Response, until func() bool) wasmtest.Response {
	var resp wasmtest.Response
	for resp.Status == 0 && !until() {
		select {
		case resp = <-done:
		default:
			r.step(time.Second)
		}
	}
	if resp.Status == 0 {
		resp = <-done
	}
	return resp
}

func countLogged(h *wasmtest.Host, part string) int {
	n := 0
	for _, l := range h.Logs() {
		if strings.Contains(l.Message, part) {
			n++
		}
	}
	return n
}

func logged(h *wasmtest.Host, part string) bool {
	for _, l := range h.Logs() {
		if strings.Contains(l.Message, part) {
			return true
		}
	}
	return false
}

// A store: redis rpm limit makes gate 1 wait for a lease at the headers
// (every request here: the fleet grants exactly what is asked, nothing
// ahead of need); with the headers held, the body keeps coming meanwhile.
// Whether the answer or the end of the body comes first, gate 2 runs
// once, after gate 1, and the request leaves with its routing headers and
// rewritten body.
func TestFleetAnswerAndHeldBody(t *testing.T) {
	limits := `{"id":"fleet_rpm","attach":{"level":"team"},"type":"rpm","amount":100000,"period":"1m","store":"redis"},` + limTeamTPM
	r := newRig(t, rigOptions{
		governance: gov(limits, `,"require_key":true,"shared_state":{"redis":{"addr":"127.0.0.1:6379","timeout":"10s"}}`),
		keys:       []testKey{dev1Key}, accountant: true, workers: 2,
	})
	grant := func(req syncwire.LeaseRequest) syncwire.LeaseAnswer {
		var out syncwire.LeaseAnswer
		for _, l := range req.Leases {
			out.Leases = append(out.Leases, syncwire.LeaseGrant{Allowed: true, Granted: l.Need, Limit: l.Amount, Remaining: l.Amount - 1,
				Anchor: "1", ValidNS: int64(time.Hour)})
		}
		return out
	}
	r.acct.mu.Lock()
	r.acct.lease = grant
	r.acct.mu.Unlock()
	r.sync()
	for i := range 20 {
		resp := r.do(req{path: "/v1/chat/completions", key: dev1Key, chunks: []string{`{"model":"gpt-4o-mini","stream":true,`, `"messages":[{"role":"user","content":"hi"}]}`}})
		mustStatus(t, resp, 200)
		if resp.Headers.Get("X-Tt-Suspended") != "" {
			t.Fatalf("request %d: the fleet did not decide: %v", i, resp.Headers)
		}
		sent, _ := r.stub.Last()
		if !bytes.Contains(sent.Body, []byte(`"include_usage":true`)) || sent.Header.Get("X-Tt-Model") != "gpt-4o-mini" {
			t.Fatalf("request %d: the provider got %s with model header %q", i, sent.Body, sent.Header.Get("X-Tt-Model"))
		}
	}
	if _, asks := r.acct.leaseCalls(); asks < 20 {
		t.Errorf("the fleet was asked %d times for 20 requests", asks)
	}
	// The fleet refuses: the held request is answered 429, whether its
	// body came before the answer or after.
	r.acct.mu.Lock()
	r.acct.lease = func(req syncwire.LeaseRequest) syncwire.LeaseAnswer {
		return syncwire.LeaseAnswer{Leases: []syncwire.LeaseGrant{{Allowed: false, Limit: 100000, RetryAfterNS: 1e9, Anchor: "1", ValidNS: int64(time.Hour)}}}
	}
	r.acct.mu.Unlock()
	for i := range 10 {
		resp := r.do(req{path: "/v1/chat/completions", key: dev1Key, chunks: []string{`{"model":"gpt-4o-mini",`, `"messages":[{"role":"user","content":"hi"}]}`}})
		mustStatus(t, resp, 429)
		if got := resp.Headers.Get("X-Tt-Refused-By"); got != "fleet_rpm" || resp.Upstream {
			t.Fatalf("request %d: refused by %q, went upstream %v", i, got, resp.Upstream)
		}
	}
}
