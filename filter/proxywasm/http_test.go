package proxywasm_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokentriage/tokentriage/filter/proxywasm"
	"github.com/tokentriage/tokentriage/filter/proxywasm/proxytest"
)

func TestRequestHeaderRoundTrip(t *testing.T) {
	var seen [][2]string
	var ct string
	var missingErr error
	h := &hooks{reqHeaders: func(_ uint32, n int, eos bool) types.Action {
		if n != len(requestHeaders) || eos {
			t.Errorf("OnHttpRequestHeaders(%d, %v), want (%d, false)", n, eos, len(requestHeaders))
		}
		var err error
		if seen, err = proxywasm.GetHttpRequestHeaders(); err != nil {
			t.Errorf("GetHttpRequestHeaders: %v", err)
		}
		if ct, err = proxywasm.GetHttpRequestHeader("content-type"); err != nil {
			t.Errorf("GetHttpRequestHeader: %v", err)
		}
		_, missingErr = proxywasm.GetHttpRequestHeader("x-missing")
		mustOK(t, proxywasm.AddHttpRequestHeader("x-added", "1"))
		mustOK(t, proxywasm.AddHttpRequestHeader("X-Added", "2"))
		mustOK(t, proxywasm.ReplaceHttpRequestHeader("x-request-id", "rid-2"))
		mustOK(t, proxywasm.RemoveHttpRequestHeader("Authorization"))
		mustOK(t, proxywasm.RemoveHttpRequestHeader("content-type"))
		return types.ActionContinue
	}}
	e := start(t, h, proxytest.Options{})
	id := e.InitializeHttpContext()
	headers := append(slices.Clone(requestHeaders), [2]string{"Authorization", "Bearer secret"})
	if act := e.CallOnRequestHeaders(id, headers[:len(requestHeaders)], false); act != types.ActionContinue {
		t.Fatalf("action = %v, want Continue", act)
	}
	if !slices.Contains(seen, [2]string{"content-type", "application/json"}) {
		t.Errorf("keys must arrive lower-cased: %q", seen)
	}
	if ct != "application/json" {
		t.Errorf("content-type = %q", ct)
	}
	if !errors.Is(missingErr, types.ErrorStatusNotFound) {
		t.Errorf("missing header err = %v, want ErrorStatusNotFound", missingErr)
	}
	want := [][2]string{
		{":method", "POST"}, {":path", "/v1/chat/completions?x=1"}, {":authority", "api.example"},
		{":scheme", "https"}, {"x-request-id", "rid-2"}, {"x-added", "1"}, {"x-added", "2"},
	}
	if got := e.GetCurrentRequestHeaders(id); !slices.Equal(got, want) {
		t.Fatalf("headers after the filter:\n got %q\nwant %q", got, want)
	}
}

func TestReplaceAllHeadersAndTrailers(t *testing.T) {
	h := &hooks{
		reqHeaders: func(uint32, int, bool) types.Action {
			mustOK(t, proxywasm.ReplaceHttpRequestHeaders([][2]string{{":path", "/x"}, {"A", "1"}}))
			return types.ActionContinue
		},
		reqTrailers: func(_ uint32, n int) types.Action {
			if v, err := proxywasm.GetHttpRequestTrailer("grpc-status"); err != nil || v != "0" || n != 1 {
				t.Errorf("trailer = %q, %v (n=%d)", v, err, n)
			}
			mustOK(t, proxywasm.AddHttpRequestTrailer("t2", "v"))
			return types.ActionContinue
		},
		respHeaders: func(uint32, int, bool) types.Action {
			mustOK(t, proxywasm.ReplaceHttpResponseHeader(":status", "201"))
			mustOK(t, proxywasm.AddHttpResponseHeader("x-tt-request-id", "tt_1"))
			return types.ActionContinue
		},
	}
	e := start(t, h, proxytest.Options{})
	id := e.InitializeHttpContext()
	e.CallOnRequestHeaders(id, requestHeaders, false)
	e.CallOnRequestTrailers(id, [][2]string{{"grpc-status", "0"}})
	e.CallOnResponseHeaders(id, [][2]string{{":status", "200"}}, true)
	if got, want := e.GetCurrentRequestHeaders(id), [][2]string{{":path", "/x"}, {"a", "1"}}; !slices.Equal(got, want) {
		t.Errorf("request headers = %q, want %q", got, want)
	}
	if got, want := e.GetCurrentRequestTrailers(id), [][2]string{{"grpc-status", "0"}, {"t2", "v"}}; !slices.Equal(got, want) {
		t.Errorf("request trailers = %q, want %q", got, want)
	}
	if got, want := e.GetCurrentResponseHeaders(id), [][2]string{{":status", "201"}, {"x-tt-request-id", "tt_1"}}; !slices.Equal(got, want) {
		t.Errorf("response headers = %q, want %q", got, want)
	}
}

// Envoy drops the request headers once OnHttpRequestHeaders returns
// Continue: a response callback cannot read them.
func TestRequestHeadersGoneInResponse(t *testing.T) {
	var valueErr, addErr error
	var pairs [][2]string
	h := &hooks{respHeaders: func(uint32, int, bool) types.Action {
		_, valueErr = proxywasm.GetHttpRequestHeader(":path")
		pairs, _ = proxywasm.GetHttpRequestHeaders()
		addErr = proxywasm.AddHttpRequestHeader("x", "y")
		return types.ActionContinue
	}}
	e := start(t, h, proxytest.Options{})
	id := e.InitializeHttpContext()
	e.CallOnRequestHeaders(id, requestHeaders, true)
	e.CallOnResponseHeaders(id, [][2]string{{":status", "200"}}, true)
	if !errors.Is(valueErr, types.ErrorStatusBadArgument) || !errors.Is(addErr, types.ErrorStatusBadArgument) {
		t.Errorf("request header access in a response callback: value err %v, add err %v; want BadArgument", valueErr, addErr)
	}
	if len(pairs) != 0 {
		t.Errorf("GetHttpRequestHeaders in a response callback = %q, want empty", pairs)
	}
}

func TestBodyReplaceAppendPrepend(t *testing.T) {
	var sizes []int
	var got []byte
	h := &hooks{reqBody: func(_ uint32, size int, eos bool) types.Action {
		sizes = append(sizes, size)
		if !eos {
			return types.ActionPause // buffer until the end
		}
		var err error
		if got, err = proxywasm.GetHttpRequestBody(0, size); err != nil {
			t.Errorf("GetHttpRequestBody: %v", err)
		}
		if part, err := proxywasm.GetHttpRequestBody(2, 3); err != nil || string(part) != "c d" {
			t.Errorf("GetHttpRequestBody(2, 3) = %q, %v; want \"c d\"", part, err)
		}
		if part, err := proxywasm.GetHttpRequestBody(100, 3); err != nil || len(part) != 0 {
			t.Errorf("GetHttpRequestBody past the end = %q, %v; want empty", part, err)
		}
		mustOK(t, proxywasm.ReplaceHttpRequestBody([]byte("middle")))
		mustOK(t, proxywasm.AppendHttpRequestBody([]byte("-tail")))
		mustOK(t, proxywasm.PrependHttpRequestBody([]byte("head-")))
		return types.ActionContinue
	}}
	e := start(t, h, proxytest.Options{})
	id := e.InitializeHttpContext()
	e.CallOnRequestHeaders(id, requestHeaders, false)
	if act := e.CallOnRequestBody(id, []byte("ab"), false); act != types.ActionPause {
		t.Fatalf("first chunk action = %v", act)
	}
	e.CallOnRequestBody(id, []byte("c d e"), true)
	if !slices.Equal(sizes, []int{2, 7}) {
		t.Errorf("body sizes = %v, want [2 7]: after Pause the host reports the whole buffered body", sizes)
	}
	if string(got) != "abc d e" {
		t.Errorf("buffered body = %q", got)
	}
	if body := e.GetCurrentRequestBody(id); string(body) != "head-middle-tail" {
		t.Errorf("upstream body = %q, want head-middle-tail", body)
	}
}

func TestBodyIntoReusesTheBuffer(t *testing.T) {
	buf := make([]byte, 0, 16)
	var chunks []string
	var landed []bool
	readInto := func(name string, get func(start, max int, dst []byte) ([]byte, error)) func(uint32, int, bool) types.Action {
		return func(_ uint32, size int, eos bool) types.Action {
			b, err := get(0, size, buf)
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			chunks = append(chunks, string(b))
			landed = append(landed, len(b) > 0 && &b[0] == &buf[:1][0])
			return types.ActionContinue
		}
	}
	h := &hooks{
		reqBody:  readInto("GetHttpRequestBodyInto", proxywasm.GetHttpRequestBodyInto),
		respBody: readInto("GetHttpResponseBodyInto", proxywasm.GetHttpResponseBodyInto),
	}
	e := start(t, h, proxytest.Options{})
	id := e.InitializeHttpContext()
	e.CallOnRequestHeaders(id, requestHeaders, false)
	e.CallOnRequestBody(id, []byte("request"), true)
	e.CallOnResponseHeaders(id, [][2]string{{":status", "200"}}, false)
	e.CallOnResponseBody(id, []byte("data: 1\n\n"), false)
	e.CallOnResponseBody(id, []byte("a chunk larger than the buffer"), true)
	if !slices.Equal(chunks, []string{"request", "data: 1\n\n", "a chunk larger than the buffer"}) {
		t.Errorf("chunks = %q", chunks)
	}
	if !slices.Equal(landed, []bool{true, true, false}) {
		t.Errorf("landed in the buffer = %v, want [true true false]: a body that fits lands in dst, a larger one gets its own", landed)
	}
}

func TestBodyStreamingWithoutPause(t *testing.T) {
	var sizes []int
	h := &hooks{respBody: func(_ uint32, size int, eos bool) types.Action {
		sizes = append(sizes, size)
		if eos {
			mustOK(t, proxywasm.AppendHttpResponseBody([]byte("!")))
		}
		return types.ActionContinue
	}}
	e := start(t, h, proxytest.Options{})
	id := e.InitializeHttpContext()
	e.CallOnRequestHeaders(id, requestHeaders, true)
	e.CallOnResponseHeaders(id, [][2]string{{":status", "200"}}, false)
	e.CallOnResponseBody(id, []byte("data: 1\n\n"), false)
	e.CallOnResponseBody(id, []byte("data: 2\n\n"), true)
	if !slices.Equal(sizes, []int{9, 9}) {
		t.Errorf("sizes = %v: after Continue each callback sees only its chunk", sizes)
	}
	if got := e.GetCurrentResponseBody(id); string(got) != "data: 1\n\ndata: 2\n\n!" {
		t.Errorf("client body = %q", got)
	}
}

func TestLocalReplyRunsResponseCallbacks(t *testing.T) {
	var respStatus string
	var respBody []byte
	h := &hooks{
		reqHeaders: func(uint32, int, bool) types.Action {
			mustOK(t, proxywasm.SendHttpResponse(429, [][2]string{{"Retry-After", "7"}, {"content-type", "application/json"}},
				[]byte(`{"error":{"type":"rate_limited"}}`), -1))
			return types.ActionPause
		},
		respHeaders: func(uint32, int, bool) types.Action {
			respStatus, _ = proxywasm.GetHttpResponseHeader(":status")
			mustOK(t, proxywasm.AddHttpResponseHeader("x-tt-request-id", "tt_abc"))
			return types.ActionContinue
		},
		respBody: func(_ uint32, size int, eos bool) types.Action {
			respBody, _ = proxywasm.GetHttpResponseBody(0, size)
			return types.ActionContinue
		},
	}
	e := start(t, h, proxytest.Options{})
	id := e.InitializeHttpContext()
	if act := e.CallOnRequestHeaders(id, requestHeaders, false); act != types.ActionPause {
		t.Fatalf("action after a local reply = %v, want Pause", act)
	}
	lr := e.GetSentLocalResponse(id)
	if lr == nil || lr.StatusCode != 429 || string(lr.Data) != `{"error":{"type":"rate_limited"}}` || lr.GRPCStatus != -1 {
		t.Fatalf("local response = %+v", lr)
	}
	if respStatus != "429" || string(respBody) != string(lr.Data) {
		t.Errorf("the local reply must pass through the filter's response callbacks: status %q, body %q", respStatus, respBody)
	}
	want := [][2]string{{":status", "429"}, {"retry-after", "7"}, {"content-type", "application/json"},
		{"content-length", "33"}, {"x-tt-request-id", "tt_abc"}}
	if got := e.GetCurrentResponseHeaders(id); !slices.Equal(got, want) {
		t.Errorf("client headers:\n got %q\nwant %q", got, want)
	}
	if act := e.CallOnRequestBody(id, []byte("x"), true); act != types.ActionPause {
		t.Errorf("a body after the local reply must not reach the filter, action %v", act)
	}
}

func TestStreamDoneOnceAndLifecycle(t *testing.T) {
	var done []uint32
	h := &hooks{streamDone: func(id uint32) {
		done = append(done, id)
		if v, err := proxywasm.GetHttpRequestHeader(":path"); err != nil || v != "/v1/chat/completions?x=1" {
			t.Errorf("request headers in OnHttpStreamDone = %q, %v", v, err)
		}
	}}
	e := start(t, h, proxytest.Options{})
	id := e.InitializeHttpContext()
	e.CallOnRequestHeaders(id, requestHeaders, true)
	e.CallOnResponseHeaders(id, [][2]string{{":status", "200"}}, true)
	e.CompleteHttpContext(id)
	e.CompleteHttpContext(id)
	if !slices.Equal(done, []uint32{id}) {
		t.Fatalf("OnHttpStreamDone calls = %v, want exactly one for %d", done, id)
	}
	// The context is gone: later callbacks are no-ops, not panics.
	if act := e.CallOnRequestHeaders(id, requestHeaders, true); act != types.ActionPause {
		t.Errorf("callback on a deleted stream = %v", act)
	}
}

func TestCallsOutsideACallback(t *testing.T) {
	if _, _, err := proxywasm.GetSharedData("k"); !errors.Is(err, proxywasm.ErrNoHost) {
		t.Errorf("GetSharedData outside a callback: %v, want ErrNoHost", err)
	}
	if _, err := proxywasm.GetHttpRequestHeader("k"); !errors.Is(err, proxywasm.ErrNoHost) {
		t.Errorf("GetHttpRequestHeader outside a callback: %v, want ErrNoHost", err)
	}
	proxywasm.LogInfo("dropped")
}

func TestHostCallCounts(t *testing.T) {
	var calls, shared uint64
	h := &hooks{reqHeaders: func(uint32, int, bool) types.Action {
		c0, s0 := proxywasm.HostCalls(), proxywasm.SharedDataOps()
		proxywasm.GetHttpRequestHeader(":path")
		proxywasm.GetSharedData("k")
		proxywasm.SetSharedData("k", []byte("v"), 0)
		calls, shared = proxywasm.HostCalls()-c0, proxywasm.SharedDataOps()-s0
		return types.ActionContinue
	}}
	e := start(t, h, proxytest.Options{})
	before := e.HostCalls()
	id := e.InitializeHttpContext()
	e.CallOnRequestHeaders(id, requestHeaders, true)
	if calls != 3 || shared != 2 {
		t.Errorf("binding counted %d host calls, %d shared-data ops; want 3, 2", calls, shared)
	}
	if n, s := e.HostCalls()-before, e.SharedDataOps(); n != 3 || s != 2 {
		t.Errorf("emulator counted %d host calls, %d shared-data ops; want 3, 2", n, s)
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
	}
}

var _ = bytes.Equal

// A map the pair format cannot carry (over 1,024 pairs or 1 MiB) is never
// handed to the host, which would empty it and answer OK: the binding
// refuses it and the map stays as it was.
func TestReplaceRefusesWhatTheHostWouldEmpty(t *testing.T) {
	var errs []error
	h := &hooks{reqHeaders: func(uint32, int, bool) types.Action {
		many := make([][2]string, 1025)
		for i := range many {
			many[i] = [2]string{"x", "y"}
		}
		errs = append(errs, proxywasm.ReplaceHttpRequestHeaders(many))
		errs = append(errs, proxywasm.ReplaceHttpRequestHeaders([][2]string{{":path", "/x"}, {"big", string(make([]byte, 1<<20))}}))
		return types.ActionContinue
	}}
	e := start(t, h, proxytest.Options{})
	id := e.InitializeHttpContext()
	e.CallOnRequestHeaders(id, requestHeaders, false)
	for i, err := range errs {
		if !errors.Is(err, proxywasm.ErrMapTooLarge) {
			t.Errorf("replace %d: %v, want ErrMapTooLarge", i, err)
		}
	}
	if got := e.GetCurrentRequestHeaders(id); len(got) != len(requestHeaders) || got[1] != [2]string{":path", "/v1/chat/completions?x=1"} {
		t.Errorf("headers after refused replaces: %q", got)
	}
}
