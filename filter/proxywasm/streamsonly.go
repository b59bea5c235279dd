package proxywasm

import "github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

// SetHttpContexts registers a VM context whose plugin contexts do nothing
// but make newHTTP's HTTP context for each stream: the whole of a filter
// that acts on streams alone (the no-op floor of the benchmarks, test
// filters). Call it from init(), as SetVMContext.
func SetHttpContexts(newHTTP func(contextID uint32) types.HttpContext) {
	SetVMContext(&streamsVM{newHTTP: newHTTP})
}

type streamsVM struct {
	types.DefaultVMContext
	newHTTP func(uint32) types.HttpContext
}

func (v *streamsVM) NewPluginContext(uint32) types.PluginContext {
	return &streamsPlugin{newHTTP: v.newHTTP}
}

type streamsPlugin struct {
	types.DefaultPluginContext
	newHTTP func(uint32) types.HttpContext
}

func (p *streamsPlugin) NewHttpContext(id uint32) types.HttpContext { return p.newHTTP(id) }
