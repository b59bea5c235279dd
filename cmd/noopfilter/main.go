// Command noopfilter is the floor for the filter's benchmarks: a proxy-wasm
// filter built exactly like cmd/filter, on the same binding, whose contexts
// return Continue from every callback and make no host call of their own.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o build/noop.wasm ./cmd/noopfilter
package main

import (
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokentriage/tokentriage/filter/proxywasm"
)

// main is never called in a reactor: the host calls _initialize, which
// runs init, and then the proxy_on_* exports.
func main() {}

func init() {
	proxywasm.SetHttpContexts(func(uint32) types.HttpContext { return &httpContext{} })
}

type httpContext struct{ types.DefaultHttpContext }
