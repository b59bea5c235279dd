// Command allcalls is a test filter that references every function of the
// binding's API, so its module imports every host call the binding can
// make: the wasm tests check that set against Envoy's.
package main

import (
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	pw "github.com/tokentriage/tokentriage/filter/proxywasm"
)

func main() {}

func init() { pw.SetVMContext(&vmContext{}) }

type vmContext struct{ types.DefaultVMContext }

func (*vmContext) NewPluginContext(uint32) types.PluginContext { return &pluginContext{} }

type pluginContext struct{ types.DefaultPluginContext }

func (*pluginContext) OnTick() {
	pw.GetPluginConfiguration()
	pw.GetVMConfiguration()
	pw.SetTickPeriodMilliSeconds(1)
	pw.SetEffectiveContext(1)
	pw.PluginDone()
	pw.GetStatus()
	pw.GetLogLevel()
	pw.LogTrace("")
	pw.LogDebugf("%d", 1)
	c := pw.DefineCounterMetric("c")
	c.Increment(1)
	_ = c.Value()
	g := pw.DefineGaugeMetric("g")
	g.Add(-1)
	g.Set(1)
	h := pw.DefineHistogramMetric("h")
	h.Record(1)
	pw.DispatchHttpCall("x", nil, nil, nil, 0, func(int, int, int) {
		pw.GetHttpCallResponseHeaders()
		pw.GetHttpCallResponseBody(0, 1)
		pw.GetHttpCallResponseTrailers()
	})
	pw.GetSharedData("k")
	pw.SetSharedData("k", nil, 0)
	pw.GetProperty([]string{"a"})
	pw.GetPropertyMap([]string{"a"})
	pw.SetProperty([]string{"a"}, nil)
}

func (*pluginContext) NewHttpContext(uint32) types.HttpContext { return &httpContext{} }

type httpContext struct{ types.DefaultHttpContext }

func (*httpContext) OnHttpRequestHeaders(int, bool) types.Action {
	pw.GetHttpRequestHeaders()
	pw.ReplaceHttpRequestHeaders(nil)
	pw.GetHttpRequestHeader("a")
	pw.RemoveHttpRequestHeader("a")
	pw.ReplaceHttpRequestHeader("a", "b")
	pw.AddHttpRequestHeader("a", "b")
	pw.GetHttpRequestBody(0, 1)
	pw.GetHttpRequestBodyInto(0, 1, nil)
	pw.AppendHttpRequestBody(nil)
	pw.PrependHttpRequestBody(nil)
	pw.ReplaceHttpRequestBody(nil)
	pw.GetHttpRequestTrailers()
	pw.ReplaceHttpRequestTrailers(nil)
	pw.GetHttpRequestTrailer("a")
	pw.RemoveHttpRequestTrailer("a")
	pw.ReplaceHttpRequestTrailer("a", "b")
	pw.AddHttpRequestTrailer("a", "b")
	pw.ResumeHttpRequest()
	pw.GetHttpResponseHeaders()
	pw.GetHttpResponseBody(0, 1)
	pw.GetHttpResponseBodyInto(0, 1, nil)
	pw.GetHttpResponseTrailers()
	pw.ResumeHttpResponse()
	pw.SendHttpResponse(500, nil, nil, -1)
	return types.ActionContinue
}
