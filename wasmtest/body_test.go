package wasmtest

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// After Pause the next body callback reports everything buffered, and
// get_buffer_bytes returns it all. The filter removed content-length at the
// headers (they went upstream then, before the body changed), so the body
// goes chunked.
func TestPausedBodyReportsTotal(t *testing.T) {
	h := newHost(t, Config{})
	resp := h.Do(Request{Headers: hdr("X-Mode", "pause-body", "X-Request-Id", "pb", "X-Want-Body-Sizes", "1"), BodyChunks: chunks("abc", "defgh", "ij")})
	if got := resp.Headers.Get("X-Body-Sizes"); got != "3,8,10e" {
		t.Errorf("body callback sizes = %q, want 3,8,10e", got)
	}
	body := string(resp.Body)
	if !strings.Contains(body, "length=-1") || !strings.Contains(body, "body: ABCDEFGHIJ!") || strings.Contains(body, "Content-Length") {
		t.Errorf("upstream saw\n%s", body)
	}
	n := notes(t, h, "pb")
	if !strings.Contains(n, "whole=0:10") || !strings.Contains(n, "replace=0") {
		t.Errorf("notes %q", n)
	}
}

// The router opens the upstream request when the headers pass the filter,
// as Envoy's does: a local reply sent at the body then resets a request the
// upstream has already seen begin.
func TestHeadersGoUpstreamOnContinue(t *testing.T) {
	seen := make(chan string, 1)
	up := Cluster{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		seen <- r.Header.Get("X-Request-Id") + " body error: " + fmt.Sprint(err != nil)
	})}
	h := newHost(t, Config{Upstream: up})
	resp := h.Do(Request{Headers: hdr("X-Mode", "local-body", "X-Request-Id", "lb"), BodyChunks: chunks("abc", "def")})
	if resp.Status != 413 || !resp.Upstream {
		t.Fatalf("status %d, went upstream %v", resp.Status, resp.Upstream)
	}
	if got := <-seen; got != "lb body error: true" {
		t.Errorf("upstream: %s", got)
	}
}

// With AllowOnHeadersStopIteration (Envoy's knob), a Pause at the headers
// holds them while the body still reaches the filter: it can set headers
// from the body, and a local reply at the body means the upstream never
// saw the request at all.
func TestHeldHeadersWaitForTheBody(t *testing.T) {
	var hits atomic.Int32
	up := Cluster{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		echo(w, r)
	})}
	h := newHost(t, Config{Upstream: up, AllowOnHeadersStopIteration: true})
	resp := h.Do(Request{Headers: hdr("X-Mode", "hold-body", "X-Request-Id", "hb", "X-Want-Body-Sizes", "1"), BodyChunks: chunks("ab", "cd", "ef")})
	body := string(resp.Body)
	if resp.Status != 200 || !strings.Contains(body, "X-From-Body: ABCDEF") || !strings.Contains(body, "Content-Length: 6") || !strings.Contains(body, "body: ABCDEF") {
		t.Errorf("got %d, upstream saw\n%s", resp.Status, body)
	}
	if got := resp.Headers.Get("X-Body-Sizes"); got != "2,4,6e" {
		t.Errorf("body callback sizes = %q, want 2,4,6e", got)
	}
	if n := notes(t, h, "hb"); !strings.Contains(n, "hdr-in-body=0;length=0") {
		t.Errorf("notes %q: the held headers were not writable in the body callback", n)
	}
	resp = h.Do(Request{Headers: hdr("X-Mode", "hold-local", "X-Request-Id", "hl"), BodyChunks: chunks("ab", "cd")})
	if resp.Status != 429 || resp.Upstream || hits.Load() != 1 {
		t.Errorf("got %d; the upstream saw %d requests, want only the first", resp.Status, hits.Load())
	}
}

// Continue passes each chunk on as it comes; proxy_set_buffer_bytes follows
// Envoy: (0,0) prepends, start ≥ length appends, anything in the middle is
// BAD_ARGUMENT. A streamed body that changed goes upstream chunked.
func TestStreamedBodyEdits(t *testing.T) {
	h := newHost(t, Config{})
	resp := h.Do(Request{Headers: hdr("X-Mode", "stream-body", "X-Request-Id", "sb", "X-Want-Body-Sizes", "1"), BodyChunks: chunks("ab", "cd", "ef")})
	if got := resp.Headers.Get("X-Body-Sizes"); got != "2,2,2e" {
		t.Errorf("body callback sizes = %q, want 2,2,2e", got)
	}
	body := string(resp.Body)
	if !strings.Contains(body, "body: [abcdef]") || !strings.Contains(body, "length=-1") {
		t.Errorf("upstream saw\n%s", body)
	}
	n := notes(t, h, "sb")
	for _, want := range []string{"prepend=0", "middle=2", "append=0"} {
		if !strings.Contains(n, want) {
			t.Errorf("notes %q lack %q", n, want)
		}
	}
}

// A body of unknown length ends with an empty body callback carrying end of
// stream, as Envoy does for chunked HTTP/1.
func TestChunkedBodyEndsWithEmptyCallback(t *testing.T) {
	h := newHost(t, Config{})
	resp := h.Do(Request{Headers: hdr("X-Mode", "plain", "X-Want-Body-Sizes", "1"), BodyChunks: chunks("ab", "cd"), Chunked: true})
	if got := resp.Headers.Get("X-Body-Sizes"); got != "2,2,0e" {
		t.Errorf("body callback sizes = %q, want 2,2,0e", got)
	}
	if !strings.Contains(string(resp.Body), "body: abcd") {
		t.Errorf("upstream saw\n%s", resp.Body)
	}
}

func TestHeadersOnlyRequest(t *testing.T) {
	h := newHost(t, Config{})
	resp := h.Do(Request{Headers: hdr("X-Mode", "plain", "X-Request-Id", "ho", "X-Want-Body-Sizes", "1")})
	if got := resp.Headers.Get("X-Body-Sizes"); got != "" {
		t.Errorf("body callbacks %q for a request without a body", got)
	}
	if n := notes(t, h, "ho"); !strings.HasPrefix(n, "headers:n=7,eos=true") {
		t.Errorf("notes %q", n)
	}
	if !strings.Contains(string(resp.Body), "GET / host=localhost length=0") {
		t.Errorf("upstream saw\n%s", resp.Body)
	}
}

// Buffering past the limit is Envoy's 413, which passes through this
// filter's response callbacks like any local reply.
func TestRequestBufferLimit(t *testing.T) {
	h := newHost(t, Config{BufferLimit: 8})
	resp := h.Do(Request{Headers: hdr("X-Mode", "pause-body", "X-Request-Id", "big"), BodyChunks: chunks("12345", "67890", "abc")})
	if resp.Status != 413 {
		t.Fatalf("status %d, want 413", resp.Status)
	}
	if n := notes(t, h, "big"); !strings.Contains(n, "resp-headers:413") || !strings.Contains(n, "log-details=request_payload_too_large") {
		t.Errorf("notes %q", n)
	}
}

// A response the filter buffers to the end and rewrites reaches the client
// with the new, exact Content-Length.
func TestResponseBufferedAndRewritten(t *testing.T) {
	h := newHost(t, Config{})
	resp := h.Do(Request{Headers: hdr("X-Mode", "resp-buffer")})
	if !strings.HasPrefix(string(resp.Body), "<GET / ") || !strings.HasSuffix(string(resp.Body), ">") {
		t.Errorf("body %q", resp.Body)
	}
	if got := resp.Headers.Get("Content-Length"); got != itoa(int64(len(resp.Body))) {
		t.Errorf("Content-Length %q for a %d-byte body", got, len(resp.Body))
	}
}

// A filter that changes a chunk after the request's content-length went
// upstream breaks it: the upstream reads no more than that length and then
// an error, and the host says what to do.
func TestStreamedEditAfterLengthWentUpstream(t *testing.T) {
	h := newHost(t, Config{})
	resp := h.Do(Request{Headers: hdr("X-Mode", "late-edit"), BodyChunks: chunks("ab", "cd")})
	if !strings.Contains(string(resp.Body), "length=4") || !strings.HasSuffix(string(resp.Body), "body: abcd") {
		t.Errorf("upstream saw\n%s", resp.Body)
	}
	if !hasLog(h, "request body changed length after content-length 4 went upstream") {
		t.Errorf("no log line explains the failure: %v", h.Logs())
	}
}
