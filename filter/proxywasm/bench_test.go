package proxywasm_test

import (
	"testing"

	"github.com/tetratelabs/wazero/api"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokentriage/tokentriage/filter/proxywasm"
	"github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"
	"github.com/tokentriage/tokentriage/filter/proxywasm/proxytest"
	"github.com/tokentriage/tokentriage/internal/testwasm"
)

// benchRequest drives one request through every HTTP callback.
func benchRequest(e *proxytest.Emulator, body []byte) {
	id := e.InitializeHttpContext()
	e.CallOnRequestHeaders(id, requestHeaders, false)
	e.CallOnRequestBody(id, body, true)
	e.CallOnResponseHeaders(id, [][2]string{{":status", "200"}, {"content-type", "application/json"}}, false)
	e.CallOnResponseBody(id, body, true)
	e.CompleteHttpContext(id)
}

// BenchmarkNativeNoopRequest is the native floor: a filter that does
// nothing, through the binding's dispatch and the emulator.
func BenchmarkNativeNoopRequest(b *testing.B) {
	e := start(b, &hooks{}, proxytest.Options{})
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	b.ReportAllocs()
	c0 := e.HostCalls()
	for b.Loop() {
		benchRequest(e, body)
	}
	b.ReportMetric(float64(e.HostCalls()-c0)/float64(b.N), "hostcalls/op")
}

// BenchmarkNativeHostCalls is a request that reads a header, does one
// shared-data CAS and adds a response header: the binding's cost per host
// call, natively.
func BenchmarkNativeHostCalls(b *testing.B) {
	var buf [8]byte
	h := &hooks{
		reqHeaders: func(uint32, int, bool) types.Action {
			proxywasm.GetHttpRequestHeader("authorization")
			_, cas, _ := proxywasm.GetSharedDataInto("tt/cell", buf[:])
			proxywasm.SetSharedData("tt/cell", buf[:], cas)
			return types.ActionContinue
		},
		respHeaders: func(uint32, int, bool) types.Action {
			proxywasm.AddHttpResponseHeader("x-tt-request-id", "tt_0123456789abcdefghijklmnop")
			return types.ActionContinue
		},
	}
	e := start(b, h, proxytest.Options{})
	body := []byte(`{}`)
	b.ReportAllocs()
	c0, s0 := e.HostCalls(), e.SharedDataOps()
	for b.Loop() {
		benchRequest(e, body)
	}
	b.ReportMetric(float64(e.HostCalls()-c0)/float64(b.N), "hostcalls/op")
	b.ReportMetric(float64(e.SharedDataOps()-s0)/float64(b.N), "shareddata/op")
}

// BenchmarkNoopModuleRequest is the wasm floor of the binding alone: the
// real noop.wasm on wazero's compiler with a host whose calls do nothing,
// one request through context create, every HTTP callback, log, done and
// delete. wasmtest's figure adds its host's work on top.
func BenchmarkNoopModuleRequest(b *testing.B) {
	ctx, mod, _ := wasmVMB(b, testwasm.Noop(b))
	create := mod.ExportedFunction("proxy_on_context_create")
	fns := []struct {
		name string
		args []uint64
		fn   api.Function
	}{
		{"proxy_on_request_headers", []uint64{0, 6, 0}, nil},
		{"proxy_on_request_body", []uint64{0, 64, 1}, nil},
		{"proxy_on_response_headers", []uint64{0, 2, 0}, nil},
		{"proxy_on_response_body", []uint64{0, 64, 1}, nil},
		{"proxy_on_log", []uint64{0}, nil},
		{"proxy_on_done", []uint64{0}, nil},
		{"proxy_on_delete", []uint64{0}, nil},
	}
	mustCall := func(name string, args ...uint64) {
		if _, err := mod.ExportedFunction(name).Call(ctx, args...); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
	}
	mustCall("proxy_on_context_create", 1, 0)
	mustCall("proxy_on_vm_start", 1, 0)
	mustCall("proxy_on_configure", 1, 0)
	for i := range fns {
		fns[i].fn = mod.ExportedFunction(fns[i].name)
	}
	id := uint64(1)
	b.ReportAllocs()
	for b.Loop() {
		id++
		if _, err := create.Call(ctx, id, 1); err != nil {
			b.Fatal(err)
		}
		for _, f := range fns {
			f.args[0] = id
			res, err := f.fn.Call(ctx, f.args...)
			if err != nil || (len(res) == 1 && f.name != "proxy_on_done" && res[0] != uint64(abi.ActionContinue)) {
				b.Fatalf("%s: %v %v", f.name, res, err)
			}
		}
	}
}
