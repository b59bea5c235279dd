package proxywasm_test

import (
	"testing"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokentriage/tokentriage/filter/proxywasm/proxytest"
)

// hooks is a filter whose callbacks are the test's functions; a nil hook
// does what types.Default*Context does.
type hooks struct {
	vmStart     func(size int) bool
	pluginStart func(size int) bool
	pluginDone  func() bool
	tick        func()
	newHTTP     func(id uint32) // runs in NewHttpContext

	reqHeaders  func(id uint32, n int, eos bool) types.Action
	reqBody     func(id uint32, size int, eos bool) types.Action
	reqTrailers func(id uint32, n int) types.Action
	respHeaders func(id uint32, n int, eos bool) types.Action
	respBody    func(id uint32, size int, eos bool) types.Action
	streamDone  func(id uint32)
}

type hookVM struct{ h *hooks }

func (v hookVM) OnVMStart(size int) types.OnVMStartStatus {
	if v.h.vmStart != nil {
		return types.OnVMStartStatus(v.h.vmStart(size))
	}
	return types.OnVMStartStatusOK
}

func (v hookVM) NewPluginContext(uint32) types.PluginContext { return &hookPlugin{h: v.h} }

type hookPlugin struct {
	types.DefaultPluginContext
	h *hooks
}

func (p *hookPlugin) OnPluginStart(size int) types.OnPluginStartStatus {
	if p.h.pluginStart != nil {
		return types.OnPluginStartStatus(p.h.pluginStart(size))
	}
	return types.OnPluginStartStatusOK
}

func (p *hookPlugin) OnPluginDone() bool {
	if p.h.pluginDone != nil {
		return p.h.pluginDone()
	}
	return true
}

func (p *hookPlugin) OnTick() {
	if p.h.tick != nil {
		p.h.tick()
	}
}

func (p *hookPlugin) NewHttpContext(id uint32) types.HttpContext {
	if p.h.newHTTP != nil {
		p.h.newHTTP(id)
	}
	return &hookHTTP{h: p.h, id: id}
}

type hookHTTP struct {
	types.DefaultHttpContext
	h  *hooks
	id uint32
}

// run calls a headers or body hook; a nil hook continues.
func (c *hookHTTP) run(hook func(id uint32, n int, eos bool) types.Action, n int, eos bool) types.Action {
	if hook == nil {
		return types.ActionContinue
	}
	return hook(c.id, n, eos)
}

func (c *hookHTTP) OnHttpRequestHeaders(n int, eos bool) types.Action {
	return c.run(c.h.reqHeaders, n, eos)
}

func (c *hookHTTP) OnHttpRequestBody(size int, eos bool) types.Action {
	return c.run(c.h.reqBody, size, eos)
}

func (c *hookHTTP) OnHttpRequestTrailers(n int) types.Action {
	if c.h.reqTrailers != nil {
		return c.h.reqTrailers(c.id, n)
	}
	return types.ActionContinue
}

func (c *hookHTTP) OnHttpResponseHeaders(n int, eos bool) types.Action {
	return c.run(c.h.respHeaders, n, eos)
}

func (c *hookHTTP) OnHttpResponseBody(size int, eos bool) types.Action {
	return c.run(c.h.respBody, size, eos)
}

func (c *hookHTTP) OnHttpStreamDone() {
	if c.h.streamDone != nil {
		c.h.streamDone(c.id)
	}
}

var (
	_ types.VMContext     = hookVM{}
	_ types.PluginContext = (*hookPlugin)(nil)
	_ types.HttpContext   = (*hookHTTP)(nil)
)

// start returns a started emulator running h.
func start(t testing.TB, h *hooks, opts proxytest.Options) *proxytest.Emulator {
	opts.VMContext = hookVM{h: h}
	e := proxytest.NewEmulator(opts)
	if st := e.StartPlugin(); st != types.OnPluginStartStatusOK {
		t.Fatalf("StartPlugin = %v, want OK", st)
	}
	return e
}

var requestHeaders = [][2]string{
	{":method", "POST"}, {":path", "/v1/chat/completions?x=1"}, {":authority", "api.example"},
	{":scheme", "https"}, {"Content-Type", "application/json"}, {"x-request-id", "rid-1"},
}
