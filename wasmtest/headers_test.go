package wasmtest

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestHeaderMapSemantics(t *testing.T) {
	h := newHost(t, Config{})
	resp := h.Do(Request{Path: "/x?q=1", Headers: hdr("X-Mode", "headers", "X-Request-Id", "r1", "X-Remove", "gone", "X-Replace", "old", "X-Multi", "a", "X-Multi", "b"), BodyChunks: chunks("hello")})
	if resp.Status != 200 {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	body := string(resp.Body)
	for _, want := range []string{"POST /x?q=1 host=localhost length=5", "X-Added: 1", "X-Replace: new", "X-Multi: a,b", "X-Request-Id: r1", "body: hello"} {
		if !strings.Contains(body, want) {
			t.Errorf("upstream saw\n%s\nwithout %q", body, want)
		}
	}
	if strings.Contains(body, "X-Remove") {
		t.Errorf("removed header reached the upstream:\n%s", body)
	}
	if got := resp.Headers.Get("X-Resp-Added"); got != "1" {
		t.Errorf("X-Resp-Added = %q", got)
	}
	if _, ok := resp.Headers["X-Upstream-Remove"]; ok {
		t.Error("the filter removed X-Upstream-Remove but the client got it")
	}
	if got := resp.Headers.Get("X-Upstream-Replace"); got != "filtered" {
		t.Errorf("X-Upstream-Replace = %q, want filtered", got)
	}
	n := notes(t, h, "r1")
	for _, want := range []string{
		"headers:n=11,eos=false", // :authority :path :method :scheme, content-length x-mode x-multi×2 x-remove x-replace x-request-id
		"add=0", "replace=0", "remove=0",
		"missing=1",             // NOT_FOUND
		"multi=a",               // the first value of a repeated header
		"size=0",                // proxy_get_header_map_size works in the headers callback
		"call-map=2",            // the callout map outside its callback: BAD_ARGUMENT
		"req-hdr-in-body=2",     // request headers after Continue: BAD_ARGUMENT
		"req-hdr-in-resp=2/0:0", // value BAD_ARGUMENT, pairs OK and empty
	} {
		if !strings.Contains(n, want) {
			t.Errorf("notes %q lack %q", n, want)
		}
	}
}

func TestSetHeaderMapPairs(t *testing.T) {
	h := newHost(t, Config{})
	resp := h.Do(Request{Headers: hdr("X-Mode", "pairs", "X-Drop", "1", "X-Keep", "2")})
	body := string(resp.Body)
	if strings.Contains(body, "X-Drop") || !strings.Contains(body, "X-Keep: 2") || !strings.Contains(body, "X-Pairs: 8") {
		t.Errorf("upstream saw\n%s", body)
	}
}

// The request map the filter sees: Envoy's pseudo-headers, lower-case names
// and an x-request-id made up when the client sent none.
func TestRequestMapHasPseudoHeadersAndRequestID(t *testing.T) {
	s := &stream{h: &Host{clock: NewManualClock(t0)}}
	r := Request{Method: "PUT", Path: "/a/b?c=d", Host: "api.example", Headers: hdr("Content-Type", "application/json", "X-Api-Key", "k"), BodyChunks: chunks("{}")}.httpRequest()
	m, eos := s.requestMap(r)
	if eos {
		t.Error("a request with a body reported end of stream at its headers")
	}
	want := []string{":authority=api.example", ":path=/a/b?c=d", ":method=PUT", ":scheme=http", "content-length=2", "content-type=application/json", "x-api-key=k"}
	for i, w := range want {
		if got := m[i].k + "=" + m[i].v; got != w {
			t.Errorf("pair %d = %s, want %s", i, got, w)
		}
	}
	id, ok := m.get("x-request-id")
	if !ok || len(id) != 36 || id[14] != '4' {
		t.Errorf("x-request-id = %q, want a UUID v4", id)
	}
}

// TestHeaderMapWritesRefuseWhatTheyCannotHold: a map that is malformed or
// over the pair format's limits (1,024 pairs, 1 MiB), set whole or grown
// one header at a time, is refused with BAD_ARGUMENT and leaves the map as
// it was; Envoy would empty it and answer OK, and the request would go on
// without its method, path or any header.
func TestHeaderMapWritesRefuseWhatTheyCannotHold(t *testing.T) {
	h := newHost(t, Config{})
	resp := h.Do(Request{Path: "/v1/x?q=1", Headers: hdr("X-Mode", "pairs-refused", "X-Request-Id", "r1", "X-Keep", "2"), BodyChunks: chunks("hello")})
	if resp.Status != 200 {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	body := string(resp.Body)
	for _, want := range []string{"POST /v1/x?q=1 host=localhost length=5", "X-Keep: 2", "X-Mode: pairs-refused", "body: hello"} {
		if !strings.Contains(body, want) {
			t.Errorf("upstream saw\n%s\nwithout %q", body, want)
		}
	}
	for _, bad := range []string{"X-Filler", "X-Added", "X-Big", "X-A:"} {
		if strings.Contains(body, bad) {
			t.Errorf("a refused write reached the upstream (%s):\n%s", bad, body)
		}
	}
	// :authority :path :method :scheme content-length x-keep x-mode
	// x-request-id: 8 pairs, so 1,016 adds fit.
	n := notes(t, h, "r1")
	for _, want := range []string{"malformed=2", "many=2", "adds=1016/2", "big=2", "local-bad=2"} {
		if !strings.Contains(n, want) {
			t.Errorf("notes %q lack %q", n, want)
		}
	}
}

// TestRequestHeaderLimits: a request past Envoy's default limits (100
// header fields, 60 KiB) is answered 431 before any filter runs; the limits
// are configurable.
func TestRequestHeaderLimits(t *testing.T) {
	many := func(n int) http.Header {
		h := http.Header{}
		for i := range n {
			h.Set(fmt.Sprintf("X-H%d", i), "v")
		}
		return h
	}
	h := newHost(t, Config{})
	for i, c := range []struct {
		headers http.Header
		status  int
		says    string
	}{
		{many(99), 200, ""}, // and Host: 100 fields
		{many(100), 431, "request header fields too large: 101 header fields; the most this proxy takes is 100 (max_request_headers_count)"},
		{http.Header{"X-Big": {strings.Repeat("b", 60<<10)}}, 431, "bytes of headers; the most this proxy takes is 60 KiB (max_request_headers_kb)"},
		{http.Header{"X-Big": {strings.Repeat("b", 59<<10)}}, 200, ""},
	} {
		resp := h.Do(Request{Path: "/x", Headers: c.headers})
		if resp.Status != c.status || !strings.Contains(string(resp.Body), c.says) {
			t.Errorf("step %d: %d %s, want %d %q", i, resp.Status, resp.Body, c.status, c.says)
		}
		if c.status == 431 {
			if resp.Counts.GuestCalls != 0 {
				t.Errorf("step %d: the filter ran (%d guest calls) for a request refused at its headers", i, resp.Counts.GuestCalls)
			}
			if resp.Headers.Get("Connection") != "close" {
				t.Errorf("step %d: the connection is kept after a 431", i)
			}
		}
	}
	wide := newHost(t, Config{MaxRequestHeadersCount: 2000, MaxRequestHeadersKB: 2048})
	resp := wide.Do(Request{Path: "/x", Headers: many(1500)})
	if resp.Status != 200 || !strings.Contains(string(resp.Body), "X-H1499: v") {
		t.Errorf("1,500 headers under a limit of 2,000: %d %.200s", resp.Status, resp.Body)
	}
}

// TestResponseHeaderLimits: an upstream answer past the cluster's limits is
// a protocol error, answered 502 before the response starts; the filter
// sees the local reply.
func TestResponseHeaderLimits(t *testing.T) {
	h := newHost(t, Config{Upstream: Cluster{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 101 {
			w.Header().Set(fmt.Sprintf("X-U%d", i), "v")
		}
		io.WriteString(w, "hello")
	})}})
	resp := h.Do(Request{Path: "/x", Headers: hdr("X-Request-Id", "r2")})
	if resp.Status != 502 || !strings.Contains(string(resp.Body), "reset reason: protocol error") || resp.Headers.Get("X-U0") != "" {
		t.Errorf("%d %v %s, want a 502 protocol error without the upstream's headers", resp.Status, resp.Headers, resp.Body)
	}
	if n := notes(t, h, "r2"); !strings.Contains(n, "resp-headers") {
		t.Errorf("the filter did not see the local reply: %q", n)
	}
}
