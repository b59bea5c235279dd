package proxywasm_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokentriage/tokentriage/filter/proxywasm"
	"github.com/tokentriage/tokentriage/filter/proxywasm/proxytest"
)

const panicBody = `{"error":{"type":"filter_error","message":"the gateway filter failed in proxy_on_request_headers while handling this request; the proxy log has the details"}}`

// A panicking request gets a 500, the panic is logged and counted, the
// stream still gets OnHttpStreamDone, and the VM keeps serving.
func TestPanicInRequestHeadersAnswers500AndTheVMKeepsServing(t *testing.T) {
	var done []uint32
	h := &hooks{
		reqHeaders: func(_ uint32, _ int, _ bool) types.Action {
			if p, _ := proxywasm.GetHttpRequestHeader(":path"); p == "/boom" {
				var m map[string]int
				m["x"]++ // nil map write: a runtime panic
			}
			return types.ActionContinue
		},
		respHeaders: func(uint32, int, bool) types.Action {
			proxywasm.AddHttpResponseHeader("x-seen", "1")
			return types.ActionContinue
		},
		streamDone: func(id uint32) { done = append(done, id) },
	}
	e := start(t, h, proxytest.Options{})
	before := proxywasm.Panics()

	bad := e.InitializeHttpContext()
	if act := e.CallOnRequestHeaders(bad, [][2]string{{":path", "/boom"}}, true); act != types.ActionPause {
		t.Fatalf("action = %v, want Pause", act)
	}
	lr := e.GetSentLocalResponse(bad)
	if lr == nil || lr.StatusCode != 500 || string(lr.Data) != panicBody ||
		!slices.Equal(lr.Headers, [][2]string{{"content-type", "application/json"}}) {
		t.Fatalf("local reply = %+v", lr)
	}
	if got := proxywasm.Panics() - before; got != 1 {
		t.Errorf("Panics() grew by %d, want 1", got)
	}
	logs := e.GetErrorLogs()
	if len(logs) != 1 || !strings.Contains(logs[0], "recovered panic in proxy_on_request_headers (context 2): assignment to entry in nil map") ||
		!strings.Contains(logs[0], "panic_test.go") {
		t.Errorf("error logs = %q", logs)
	}
	// The failed stream's later callbacks do not reach the filter: the
	// 500 went through the response path without x-seen.
	if slices.Contains(e.GetCurrentResponseHeaders(bad), [2]string{"x-seen", "1"}) {
		t.Errorf("a failed stream's response callback reached the filter: %q", e.GetCurrentResponseHeaders(bad))
	}
	e.CompleteHttpContext(bad)

	good := e.InitializeHttpContext()
	if act := e.CallOnRequestHeaders(good, requestHeaders, true); act != types.ActionContinue {
		t.Fatalf("next request action = %v", act)
	}
	e.CallOnResponseHeaders(good, [][2]string{{":status", "200"}}, true)
	if !slices.Contains(e.GetCurrentResponseHeaders(good), [2]string{"x-seen", "1"}) {
		t.Error("the VM stopped serving after a panic")
	}
	e.CompleteHttpContext(good)
	if !slices.Equal(done, []uint32{bad, good}) {
		t.Errorf("OnHttpStreamDone ran for %v, want both streams", done)
	}
}

func TestPanicHandler(t *testing.T) {
	t.Cleanup(func() { proxywasm.SetPanicHandler(nil) })
	var got proxywasm.Panic
	proxywasm.SetPanicHandler(func(p proxywasm.Panic) (uint32, [][2]string, []byte) {
		got = p
		return 503, [][2]string{{"x-tt-refusal-type", "filter_error"}}, []byte("custom")
	})
	h := &hooks{reqBody: func(uint32, int, bool) types.Action { panic(errors.New("bad body")) }}
	e := start(t, h, proxytest.Options{})
	id := e.InitializeHttpContext()
	e.CallOnRequestHeaders(id, requestHeaders, false)
	e.CallOnRequestBody(id, []byte("{"), true)
	lr := e.GetSentLocalResponse(id)
	if lr == nil || lr.StatusCode != 503 || string(lr.Data) != "custom" {
		t.Fatalf("local reply = %+v", lr)
	}
	if got.Callback != "proxy_on_request_body" || got.ContextID != id || got.Value.(error).Error() != "bad body" || got.Stack == "" {
		t.Errorf("handler got %+v", got)
	}

	// A handler that panics itself falls back to the default reply.
	proxywasm.SetPanicHandler(func(proxywasm.Panic) (uint32, [][2]string, []byte) { panic("handler") })
	id = e.InitializeHttpContext()
	e.CallOnRequestHeaders(id, requestHeaders, false)
	e.CallOnRequestBody(id, []byte("{"), true)
	if lr := e.GetSentLocalResponse(id); lr == nil || lr.StatusCode != 500 {
		t.Fatalf("fallback reply = %+v", lr)
	}
}

// A context that panics on creation owes its client a reply.
func TestPanicInNewHttpContext(t *testing.T) {
	h := &hooks{newHTTP: func(uint32) { panic("no context for you") }}
	e := start(t, h, proxytest.Options{})
	id := e.InitializeHttpContext()
	if act := e.CallOnRequestHeaders(id, requestHeaders, true); act != types.ActionPause {
		t.Fatalf("action = %v", act)
	}
	lr := e.GetSentLocalResponse(id)
	if lr == nil || lr.StatusCode != 500 || !strings.Contains(string(lr.Data), "proxy_on_context_create") {
		t.Fatalf("local reply = %+v", lr)
	}
	e.CompleteHttpContext(id)
}

// Plugin callbacks return their safe defaults.
func TestPanicInPluginCallbacks(t *testing.T) {
	h := &hooks{
		pluginStart: func(int) bool { panic("bad config") },
	}
	e := proxytest.NewEmulator(proxytest.Options{VMContext: hookVM{h: h}})
	if st := e.StartPlugin(); st != types.OnPluginStartStatusFailed {
		t.Errorf("OnPluginStart that panics = %v, want Failed", st)
	}

	ticks := 0
	h2 := &hooks{
		pluginStart: func(int) bool { return proxywasm.SetTickPeriodMilliSeconds(1) == nil },
		tick: func() {
			ticks++
			if ticks == 1 {
				panic("tick")
			}
		},
		pluginDone: func() bool { panic("done") },
	}
	e2 := start(t, h2, proxytest.Options{})
	e2.Tick()
	e2.Tick()
	if ticks != 2 {
		t.Errorf("ticks = %d: the VM must keep ticking after a panic", ticks)
	}
	if !e2.FinishVM() {
		t.Error("OnPluginDone that panics must answer true (delete now)")
	}
}

func TestPanicInCalloutCallback(t *testing.T) {
	h := &hooks{reqHeaders: func(uint32, int, bool) types.Action {
		proxywasm.DispatchHttpCall("accountant", calloutHeaders, nil, nil, 0, func(int, int, int) { panic("callout") })
		return types.ActionPause
	}}
	e := start(t, h, proxytest.Options{})
	id := e.InitializeHttpContext()
	e.CallOnRequestHeaders(id, requestHeaders, true)
	calls := e.GetPendingHttpCalls()
	if len(calls) != 1 {
		t.Fatalf("callouts = %+v", calls)
	}
	mustOK(t, e.CallOnHttpCallResponse(calls[0].CalloutID, nil, nil, nil))
	if lr := e.GetSentLocalResponse(id); lr == nil || lr.StatusCode != 500 {
		t.Fatalf("the paused stream must get the 500: %+v", lr)
	}
}
