// Command panicfilter is a test filter for the binding's wasm tests: its
// request-headers callback panics when the host reports 13 headers, and
// answers Continue otherwise.
package main

import (
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokentriage/tokentriage/filter/proxywasm"
)

func main() {}

func init() {
	proxywasm.SetHttpContexts(func(uint32) types.HttpContext { return &httpContext{} })
}

type httpContext struct{ types.DefaultHttpContext }

func (*httpContext) OnHttpRequestHeaders(n int, _ bool) types.Action {
	if n == 13 {
		var m map[string]int
		m["boom"]++
	}
	return types.ActionContinue
}
