// Package proxywasm is the proxy-wasm ABI v0.2.1 binding for filters built
// with the standard Go toolchain:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o filter.wasm ./cmd/filter
//
// It owns the guest side of the ABI: the proxy_on_* exports, the env.proxy_*
// imports, the context registry that maps the host's context ids to the
// plugin's types.PluginContext and types.HttpContext values, panic recovery
// at every export, and a Go API whose names follow the proxy-wasm-go-sdk's
// proxywasm package (GetHttpRequestHeader, DispatchHttpCall, SetSharedData,
// …), so filter code reads as it would against the SDK.
//
// A filter registers its types.VMContext from init() with SetVMContext and
// must not call the host from init(): Envoy runs _initialize in a restricted
// mode where every proxy_* call but proxy_log traps. Contexts are created on
// proxy_on_context_create: a parent of 0 creates a plugin context through
// VMContext.NewPluginContext, any other parent an HTTP context through that
// plugin context's NewHttpContext.
//
// Built without the wasip1 tag the package is a native stand-in: the same
// API, served by the in-memory host of package proxytest, so everything
// above the binding builds and tests with a plain `go test`.
//
// The API may only be called from inside a callback (or a callout callback
// the binding runs), on the callback's goroutine. Host data handed back
// (header values, bodies, shared-data values) is freshly allocated and may
// be kept.
//
// RATIONALE.md ("Why does the filter carry its own proxy-wasm binding?" and
// the sections after it) explains the choices.
package proxywasm
