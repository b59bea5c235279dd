package wasmtest

import (
	"net/http"
	"strings"
	"testing"
)

func hasLog(h *Host, substr string) bool {
	for _, e := range h.Logs() {
		if strings.Contains(e.Message, substr) {
			return true
		}
	}
	return false
}

// Fail closed: the stream that trapped and every later stream on that VM
// are answered 503 (wasm_fail_stream); nothing is called on the VM again.
func TestTrapFailsClosed(t *testing.T) {
	var upstream int
	h := newHost(t, Config{Upstream: Cluster{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { upstream++ })}})
	resp := h.Do(Request{Headers: hdr("X-Mode", "trap", "X-Request-Id", "t1")})
	if resp.Status != 503 || len(resp.Body) != 0 {
		t.Errorf("trapping stream got %d %q, want an empty 503", resp.Status, resp.Body)
	}
	failed, why := h.Failed(1)
	if !failed || why != "Function: proxy_on_request_headers failed: wasm error: unreachable" {
		t.Errorf("Failed = %v, %q", failed, why)
	}
	// With Envoy's poll_oneoff (ENOSYS) the Go runtime cannot sleep while
	// it freezes the world to panic, so what reaches stderr is "fatal
	// error: wasi_snapshot_preview1.poll_oneoff", "panic during panic" and
	// the stack, not the panic value: a filter should log before it traps.
	for _, want := range []string{"fatal error: ", "panic during panic", "main.onRequestHeaders"} {
		if !hasLog(h, want) {
			t.Errorf("no log line contains %q", want)
		}
	}
	resp = h.Do(Request{Headers: hdr("X-Mode", "headers", "X-Request-Id", "t2"), BodyChunks: chunks("x")})
	if resp.Status != 503 || resp.Headers.Get("X-Resp-Added") != "" {
		t.Errorf("later stream got %d %v, want 503 without filter headers", resp.Status, resp.Headers)
	}
	if upstream != 0 {
		t.Errorf("the upstream was called %d times", upstream)
	}
	if _, _, ok := h.SharedData("notes:t2"); ok {
		t.Error("the failed VM ran callbacks for a later stream")
	}
}

// Fail open: streams pass through unfiltered.
func TestTrapFailsOpen(t *testing.T) {
	h := newHost(t, Config{FailOpen: true})
	resp := h.Do(Request{Headers: hdr("X-Mode", "trap"), BodyChunks: chunks("abc")})
	if resp.Status != 200 || !strings.Contains(string(resp.Body), "X-Mode: trap") || !strings.Contains(string(resp.Body), "body: abc") {
		t.Errorf("trapping stream got %d\n%s", resp.Status, resp.Body)
	}
	resp = h.Do(Request{Headers: hdr("X-Mode", "headers", "X-Remove", "kept")})
	if resp.Status != 200 || !strings.Contains(string(resp.Body), "X-Remove: kept") || resp.Headers.Get("X-Resp-Added") != "" {
		t.Errorf("later stream was filtered: %d %v\n%s", resp.Status, resp.Headers, resp.Body)
	}
}

func TestTrapInBodyFailsClosed(t *testing.T) {
	h := newHost(t, Config{})
	resp := h.Do(Request{Headers: hdr("X-Mode", "trap-body"), BodyChunks: chunks("a", "b")})
	if resp.Status != 503 {
		t.Errorf("got %d %q", resp.Status, resp.Body)
	}
}

// A trap in a response callback, before the response reached the client,
// replaces the response with the 503.
func TestTrapInResponseFailsClosed(t *testing.T) {
	h := newHost(t, Config{})
	resp := h.Do(Request{Headers: hdr("X-Mode", "resp-trap")})
	if resp.Status != 503 || len(resp.Body) != 0 {
		t.Errorf("got %d %q", resp.Status, resp.Body)
	}
}

// FAIL_RELOAD: the next stream gets a fresh VM.
func TestReloadOnFailure(t *testing.T) {
	h := newHost(t, Config{ReloadOnFailure: true})
	if resp := h.Do(Request{Headers: hdr("X-Mode", "trap")}); resp.Status != 503 {
		t.Errorf("trapping stream got %d", resp.Status)
	}
	resp := h.Do(Request{Headers: hdr("X-Mode", "headers")})
	if resp.Status != 200 || resp.Headers.Get("X-Resp-Added") != "1" {
		t.Errorf("stream after the reload got %d %v", resp.Status, resp.Headers)
	}
	if failed, _ := h.Failed(1); failed {
		t.Error("worker 1 still failed after the reload")
	}
}

// A stream paused on a VM that fails under it is failed at once (503), not
// left waiting for a callout that will never be delivered.
func TestPausedStreamFailsWithItsVM(t *testing.T) {
	started := make(chan struct{})
	block := Cluster{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
	})}
	h := newHost(t, Config{Clusters: map[string]Cluster{"auth": block}})
	done := make(chan Response)
	go func() { done <- h.Do(Request{Headers: hdr("X-Mode", "callout")}) }()
	<-started
	if resp := h.Do(Request{Headers: hdr("X-Mode", "trap")}); resp.Status != 503 {
		t.Errorf("trapping stream got %d", resp.Status)
	}
	if resp := <-done; resp.Status != 503 {
		t.Errorf("paused stream got %d %q", resp.Status, resp.Body)
	}
}
