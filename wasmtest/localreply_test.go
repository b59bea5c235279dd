package wasmtest

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// A local reply sent before the response started runs this filter's own
// response callbacks (Envoy issue #11447); the callback's result is a stop
// even when the guest returned Continue; a second send_local_response is
// BAD_ARGUMENT.
func TestLocalReplyRunsResponseCallbacks(t *testing.T) {
	var upstream atomic.Int32
	h := newHost(t, Config{Upstream: Cluster{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { upstream.Add(1) })}})
	resp := h.Do(Request{Headers: hdr("X-Mode", "local", "X-Request-Id", "lr"), BodyChunks: chunks("ignored")})
	if resp.Status != 403 || string(resp.Body) != "NO ENTRY" {
		t.Errorf("got %d %q, want 403 NO ENTRY (upper-cased by the filter's response body callback)", resp.Status, resp.Body)
	}
	for k, want := range map[string]string{"X-Local": "1", "X-Resp-Seen": "1", "Content-Type": "text/plain", "Content-Length": "8"} {
		if got := resp.Headers.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if upstream.Load() != 0 {
		t.Error("the upstream was called")
	}
	n := notes(t, h, "lr")
	for _, want := range []string{"local=0", "again=2", "resp-headers:403,eos=false", "resp-body:8e", "log-code=403", "log-details=denied_by_test"} {
		if !strings.Contains(n, want) {
			t.Errorf("notes %q lack %q", n, want)
		}
	}
}

func TestLocalReplyFromBody(t *testing.T) {
	h := newHost(t, Config{})
	resp := h.Do(Request{Headers: hdr("X-Mode", "local-body"), BodyChunks: chunks("a", "b")})
	if resp.Status != 413 || string(resp.Body) != "big" || resp.Headers.Get("X-Resp-Seen") != "1" {
		t.Errorf("got %d %q %v", resp.Status, resp.Body, resp.Headers)
	}
}

func TestLocalReplyWithoutBody(t *testing.T) {
	h := newHost(t, Config{})
	resp := h.Do(Request{Headers: hdr("X-Mode", "local-empty", "X-Request-Id", "le")})
	if resp.Status != 204 || len(resp.Body) != 0 || resp.Headers.Get("X-Resp-Seen") != "1" {
		t.Errorf("got %d %q %v", resp.Status, resp.Body, resp.Headers)
	}
	if n := notes(t, h, "le"); !strings.Contains(n, "resp-headers:204,eos=true") {
		t.Errorf("notes %q", n)
	}
}

// A local reply sent once the response has begun replaces it directly:
// the response callbacks do not run again.
func TestLocalReplyAfterResponseBegunIsDirect(t *testing.T) {
	h := newHost(t, Config{})
	resp := h.Do(Request{Headers: hdr("X-Mode", "resp-local", "X-Request-Id", "rl")})
	if resp.Status != 502 || string(resp.Body) != "replaced" {
		t.Errorf("got %d %q", resp.Status, resp.Body)
	}
	n := notes(t, h, "rl")
	if strings.Count(n, "resp-headers:") != 1 || !strings.Contains(n, "resp-local=0") || strings.Contains(n, "resp-body") {
		t.Errorf("notes %q: want one response-headers callback and no body callback", n)
	}
}

// With no upstream configured, what the filter lets through meets Envoy's
// 404 route_not_found, again through the response callbacks.
func TestNoUpstreamIsRouteNotFound(t *testing.T) {
	h, err := New(t.Context(), Config{Module: conformance(t), Clock: NewManualClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	resp := h.Do(Request{Headers: hdr("X-Mode", "headers", "X-Request-Id", "nr")})
	if resp.Status != 404 || resp.Headers.Get("X-Resp-Added") != "1" {
		t.Errorf("got %d %v", resp.Status, resp.Headers)
	}
	if n := notes(t, h, "nr"); !strings.Contains(n, "log-details=route_not_found") {
		t.Errorf("notes %q", n)
	}
}

// proxy_close_stream resets the stream; the lifecycle still completes.
func TestCloseStreamResets(t *testing.T) {
	h := newHost(t, Config{})
	resp := h.Do(Request{Headers: hdr("X-Mode", "close", "X-Request-Id", "cs")})
	if !resp.Reset {
		t.Errorf("got %d %q, want a reset", resp.Status, resp.Body)
	}
	n := notes(t, h, "cs")
	if !strings.Contains(n, "close=0") || !strings.HasSuffix(n, "|log,done,delete") || !strings.Contains(n, "log-details=wasm_close_stream") {
		t.Errorf("notes %q", n)
	}
}
