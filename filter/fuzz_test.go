package filter_test

import (
	"bytes"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/wasmtest"
)

// The fuzz targets drive the real filter.wasm. One host serves every input
// of a target; after each input the target checks that no VM trapped and
// nothing panicked (a trap would fail the VM, and every later request on it
// would be a 503).

// fuzzLimits arms every limit type so each input walks both gates.
var fuzzLimits = gov(strings.Join([]string{
	`{"id":"g_rpm","attach":{"node":"__global"},"type":"rpm","amount":1000000,"period":"1s","algorithm":"token_bucket"}`,
	`{"id":"u_conc","attach":{"level":"user"},"type":"concurrency","amount":1000}`,
	`{"id":"t_tpm","attach":{"level":"team"},"type":"tpm","amount":100000000,"period":"1m"}`,
	`{"id":"o_budget","attach":{"level":"org"},"type":"budget_usd","amount_usd":1000,"period":"month"}`,
	`{"id":"m_tpm","attach":{"node":"__global"},"type":"tpm","amount":100000000,"period":"1m","match":{"model":"gpt-*"}}`,
}, ","))

// fuzzHost is one host per target and process, behind a lock (inputs run
// one at a time; the host itself is safe for concurrent use, but a failure
// must be pinned to the input that caused it).
type fuzzHost struct {
	mu  sync.Mutex
	r   *rig
	bad badLines
}

// badLines records log lines that show a trap or a panic.
type badLines struct {
	mu    sync.Mutex
	lines []string
}

func (b *badLines) Write(p []byte) (int, error) {
	if line := string(p); strings.Contains(line, "panic") || strings.Contains(line, "[critical]") {
		b.mu.Lock()
		b.lines = append(b.lines, line)
		b.mu.Unlock()
	}
	return len(p), nil
}

func (b *badLines) take() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.lines
	b.lines = nil
	return l
}

func newFuzzHost(f *testing.F, upstream http.Handler) *fuzzHost {
	fh := &fuzzHost{}
	// A tick an hour: the clock can jump past every window between inputs
	// without running ticks (and leases outlive three of them).
	fh.r = newRig(f, rigOptions{governance: fuzzLimits, keys: []testKey{dev1Key}, upstream: upstream, log: &fh.bad,
		extra: []string{`"max_body_bytes":65536`, `"flush_interval":"1h"`, `"lease_ttl":"3h"`}})
	return fh
}

// next starts every window afresh for the next input, so one input's
// usage cannot refuse the next.
func (fh *fuzzHost) next() { fh.r.clock.Advance(2 * time.Minute) }

// check fails t when a VM trapped or a panic was logged.
func (fh *fuzzHost) check(t *testing.T, what string) {
	t.Helper()
	for n := 1; n <= fh.r.h.Workers(); n++ {
		if failed, why := fh.r.h.Failed(n); failed {
			t.Fatalf("%s: worker VM %d trapped: %s", what, n, why)
		}
	}
	if bad := fh.bad.take(); len(bad) > 0 {
		t.Fatalf("%s: the VMs logged %d lines like %s", what, len(bad), bad[0])
	}
}

// FuzzRequestHeaders feeds arbitrary methods, paths and header lines
// ("name: value" per line) through gate 1.
func FuzzRequestHeaders(f *testing.F) {
	for _, s := range []struct{ method, path, headers string }{
		{"POST", "/v1/chat/completions", "authorization: Bearer " + dev1Key.key},
		{"GET", "/tt/v1/me", "authorization: bearer   " + dev1Key.key + "  "},
		{"GET", "/tt/v1/me?x=1", "x-api-key: " + dev1Key.key},
		{"DELETE", "/tt/", "authorization: Bearer tt-vk_"},
		{"GET", "/v1/models", "authorization: Bearer tt-vk_FEKZdMs2UQRi-"},
		{"POST", "/v1/messages", "x-api-key: tt-vk_FEKZdMs2UQRi-3kLwQ0vX9bY2cD4eF6gH8iJ0kL2mN4oQ\nauthorization: Basic Zm9v"},
		{"PUT", "//v1/chat/completions?", "authorization: Bearer"},
		{"POST", "/v1/chat/completions", "content-length: 5\nauthorization: Bearer \xff\xfe"},
		{"GET", "/tt/v1/me", "authorization: Bearer tt-vk_\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00-x"},
	} {
		f.Add(s.method, s.path, s.headers)
	}
	fh := newFuzzHost(f, nil)
	f.Fuzz(func(t *testing.T, method, path, headers string) {
		fh.mu.Lock()
		defer fh.mu.Unlock()
		defer fh.next()
		if method == "" || strings.ContainsAny(method, " \t\r\n") {
			method = "GET"
		}
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		hdr := http.Header{}
		for _, line := range strings.Split(headers, "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok || k == "" || strings.ContainsAny(k, " \t\r:") || strings.EqualFold(k, "content-length") ||
				strings.EqualFold(k, "transfer-encoding") || strings.EqualFold(k, "host") ||
				strings.HasPrefix(strings.ToLower(k), "x-stub-") { // the stub's knobs (delays) are not the filter's input
				continue
			}
			hdr.Add(k, strings.TrimLeft(v, " "))
		}
		var chunks [][]byte
		if method == "POST" {
			chunks = [][]byte{[]byte(chatGermany)}
		}
		resp := fh.r.h.Do(wasmtest.Request{Method: method, Path: path, Headers: hdr, BodyChunks: chunks})
		if resp.Status >= 500 && resp.Status != 502 && resp.Status != 503 {
			t.Errorf("status %d: %s", resp.Status, resp.Body)
		}
		fh.check(t, method+" "+path)
	})
}

// FuzzRequestBody feeds arbitrary request bodies, in up to three chunks,
// to each governed endpoint (gate 2: parsing, scopes, the reserve, the
// include_usage rewrite).
func FuzzRequestBody(f *testing.F) {
	paths := []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses", "/v1/messages"}
	for _, s := range []string{
		chatGermany,
		chatBody("gpt-4o", germany, `,"stream":true`),
		chatBody("gpt-4o", germany, `,"stream":true,"stream_options":{"include_usage":false}`),
		chatBody("gpt-4o", germany, `,"stream":true,"stream_options":null,"max_tokens":-1`),
		`{"model":"gpt-4.1","prompt":[1,2,3],"max_tokens":99999999999999999999}`,
		`{"model":"o4-mini","input":[{"role":"user","content":[{"type":"input_text","text":"x"}]}],"max_output_tokens":5}`,
		messagesBody("claude-sonnet-4-20250514", germany, `,"system":[{"type":"text","text":"s"}],"stream":true`),
		`{"model":"gpt-4o","model":"gpt-4o-mini","messages":[]}`,
		`{"model":"\ud800","messages":[{"role":"user","content":"\u0000"}]}`,
		`[]`, `{`, ``, `null`, "\xef\xbb\xbf{}",
	} {
		for i := range paths {
			f.Add(uint8(i), uint8(0), []byte(s))
		}
	}
	fh := newFuzzHost(f, nil)
	f.Fuzz(func(t *testing.T, which, split uint8, body []byte) {
		fh.mu.Lock()
		defer fh.mu.Unlock()
		defer fh.next()
		path := paths[int(which)%len(paths)]
		var chunks [][]byte
		if n := len(body); n > 0 {
			a, b := int(split&0x0f)*n/16, int(split>>4)*n/16
			if a > b {
				a, b = b, a
			}
			for _, c := range [][]byte{body[:a], body[a:b], body[b:]} {
				if len(c) > 0 {
					chunks = append(chunks, c)
				}
			}
		}
		hdr := http.Header{"Authorization": {"Bearer " + dev1Key.key}, "Content-Type": {"application/json"}}
		q := wasmtest.Request{Method: "POST", Path: path, Headers: hdr, BodyChunks: chunks, Chunked: split&1 == 1}
		if split&2 == 2 {
			q.Trailers = http.Header{"X-Checksum": {"0"}}
		}
		resp := fh.r.h.Do(q)
		switch resp.Status {
		case 200, 400, 413, 429:
		default:
			t.Errorf("%s: status %d: %s", path, resp.Status, resp.Body)
		}
		fh.check(t, path)
	})
}

// FuzzResponseStream feeds arbitrary upstream answers back through the
// response callbacks: SSE bytes (in up to three writes) to a streaming
// chat request (usage injected and stripped) or a streaming messages
// request, and JSON bodies to non-streaming ones.
func FuzzResponseStream(f *testing.F) {
	for _, s := range []string{
		"data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\ndata: [DONE]\n\n",
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\n",
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":-1,\"total_tokens\":99999999999999999999}}\r\n\r\n",
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1}}",
		":comment\n\ndata:\n\ndata: [DONE]",
		`{"id":"x","model":"gpt-4o","usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`,
		`{"usage":{"input_tokens":1e400}}`,
		"",
	} {
		for mode := uint8(0); mode < 4; mode++ {
			f.Add(mode, uint8(0x84), []byte(s))
		}
	}
	var cur struct {
		sync.Mutex
		body  []byte
		split uint8
		ctype string
	}
	upstream := http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		cur.Lock()
		body, split, ctype := cur.body, cur.split, cur.ctype
		cur.Unlock()
		w.Header().Set("Content-Type", ctype)
		n := len(body)
		a, b := int(split&0x0f)*n/16, int(split>>4)*n/16
		if a > b {
			a, b = b, a
		}
		for _, c := range [][]byte{body[:a], body[a:b], body[b:]} {
			w.Write(c)
			if fl, ok := w.(http.Flusher); ok {
				fl.Flush()
			}
		}
	})
	fh := newFuzzHost(f, upstream)
	f.Fuzz(func(t *testing.T, mode, split uint8, body []byte) {
		fh.mu.Lock()
		defer fh.mu.Unlock()
		defer fh.next()
		var path, reqBody, ctype string
		switch mode % 4 {
		case 0:
			path, reqBody, ctype = "/v1/chat/completions", chatBody("gpt-4o", germany, `,"stream":true`), "text/event-stream"
		case 1:
			path, reqBody, ctype = "/v1/messages", messagesBody("claude-sonnet-4-20250514", germany, `,"stream":true`), "text/event-stream; charset=utf-8"
		case 2:
			path, reqBody, ctype = "/v1/chat/completions", chatGermany, "application/json"
		default:
			path, reqBody, ctype = "/v1/responses", `{"model":"o4-mini","input":"hi"}`, "application/json"
		}
		cur.Lock()
		cur.body, cur.split, cur.ctype = body, split, ctype
		cur.Unlock()
		hdr := http.Header{"Authorization": {"Bearer " + dev1Key.key}, "Content-Type": {"application/json"}}
		resp := fh.r.h.Do(wasmtest.Request{Method: "POST", Path: path, Headers: hdr, BodyChunks: [][]byte{[]byte(reqBody)}})
		if resp.Status != 200 {
			t.Fatalf("%s: status %d: %s", path, resp.Status, resp.Body)
		}
		// Without a usage chunk to strip, what the upstream sent reaches
		// the client untouched.
		if mode%4 != 0 && !bytes.Equal(resp.Body, body) {
			t.Errorf("%s: the client got %q, the upstream sent %q", path, resp.Body, body)
		}
		fh.check(t, path)
	})
}
