package wasmtest

import (
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
