//go:build wasip1

package proxywasm

// The proxy_on_* exports (fact sheet 1.2). Each forwards to its dispatch
// function (dispatch.go), which recovers panics. Callbacks this binding
// does not export (TCP, gRPC, foreign functions) are optional for the
// host.

// theVM is the one VM state of this wasm instance.
var theVM = newVMState(nil)

func state() *vmState { return theVM }

//go:wasmexport proxy_abi_version_0_2_1
func proxyABIVersion021() {}

//go:wasmexport proxy_on_memory_allocate
func proxyOnMemoryAllocate(size uint32) *byte { return allocate(size) }

//go:wasmexport proxy_on_context_create
func proxyOnContextCreate(contextID, parentID uint32) { onContextCreate(contextID, parentID) }

//go:wasmexport proxy_on_vm_start
func proxyOnVMStart(rootID, vmConfigurationSize uint32) bool {
	return onVMStart(rootID, vmConfigurationSize)
}

//go:wasmexport proxy_on_configure
func proxyOnConfigure(rootID, pluginConfigurationSize uint32) bool {
	return onConfigure(rootID, pluginConfigurationSize)
}

//go:wasmexport proxy_on_tick
func proxyOnTick(rootID uint32) { onTick(rootID) }

//go:wasmexport proxy_on_queue_ready
func proxyOnQueueReady(rootID, queueID uint32) { onQueueReady(rootID, queueID) }

//go:wasmexport proxy_on_request_headers
func proxyOnRequestHeaders(contextID, numHeaders uint32, endOfStream bool) uint32 {
	return uint32(onStream(contextID, cbRequestHeaders, numHeaders, endOfStream))
}

//go:wasmexport proxy_on_request_body
func proxyOnRequestBody(contextID, bodySize uint32, endOfStream bool) uint32 {
	return uint32(onStream(contextID, cbRequestBody, bodySize, endOfStream))
}

//go:wasmexport proxy_on_request_trailers
func proxyOnRequestTrailers(contextID, numTrailers uint32) uint32 {
	return uint32(onStream(contextID, cbRequestTrailers, numTrailers, false))
}

//go:wasmexport proxy_on_response_headers
func proxyOnResponseHeaders(contextID, numHeaders uint32, endOfStream bool) uint32 {
	return uint32(onStream(contextID, cbResponseHeaders, numHeaders, endOfStream))
}

//go:wasmexport proxy_on_response_body
func proxyOnResponseBody(contextID, bodySize uint32, endOfStream bool) uint32 {
	return uint32(onStream(contextID, cbResponseBody, bodySize, endOfStream))
}

//go:wasmexport proxy_on_response_trailers
func proxyOnResponseTrailers(contextID, numTrailers uint32) uint32 {
	return uint32(onStream(contextID, cbResponseTrailers, numTrailers, false))
}

//go:wasmexport proxy_on_http_call_response
func proxyOnHttpCallResponse(rootID, calloutID, numHeaders, bodySize, numTrailers uint32) {
	onHttpCallResponse(rootID, calloutID, numHeaders, bodySize, numTrailers)
}

//go:wasmexport proxy_on_log
func proxyOnLog(contextID uint32) { onLog(contextID) }

//go:wasmexport proxy_on_done
func proxyOnDone(contextID uint32) bool { return onDone(contextID) }

//go:wasmexport proxy_on_delete
func proxyOnDelete(contextID uint32) { onDelete(contextID) }
