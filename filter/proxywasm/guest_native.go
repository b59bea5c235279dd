//go:build !wasip1

package proxywasm

import (
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokentriage/tokentriage/filter/proxywasm/internal/nativehost"
)

// The native stand-in keeps one vmState per emulated VM and finds the one
// that is running through nativehost.

func init() { nativehost.Register(nativeGuest{}) }

func state() *vmState {
	if v := nativehost.Current(); v != nil {
		s, _ := v.State.(*vmState)
		return s
	}
	return nil
}

// nativeGuest forwards the emulated host's callbacks to the dispatch
// functions, exactly as the wasip1 exports do.
type nativeGuest struct{}

var _ nativehost.Guest = nativeGuest{}

func (nativeGuest) NewState(vm types.VMContext) any    { return newVMState(vm) }
func (nativeGuest) OnContextCreate(id, parent uint32)  { onContextCreate(id, parent) }
func (nativeGuest) OnVMStart(root, size uint32) bool   { return onVMStart(root, size) }
func (nativeGuest) OnConfigure(root, size uint32) bool { return onConfigure(root, size) }
func (nativeGuest) OnTick(root uint32)                 { onTick(root) }
func (nativeGuest) OnQueueReady(root, queue uint32)    { onQueueReady(root, queue) }
func (nativeGuest) OnLog(id uint32)                    { onLog(id) }
func (nativeGuest) OnDone(id uint32) bool              { return onDone(id) }
func (nativeGuest) OnDelete(id uint32)                 { onDelete(id) }
func (nativeGuest) OnRequestTrailers(id, n uint32) uint32 {
	return uint32(onStream(id, cbRequestTrailers, n, false))
}
func (nativeGuest) OnResponseTrailers(id, n uint32) uint32 {
	return uint32(onStream(id, cbResponseTrailers, n, false))
}
func (nativeGuest) OnRequestHeaders(id, n uint32, eos bool) uint32 {
	return uint32(onStream(id, cbRequestHeaders, n, eos))
}
func (nativeGuest) OnRequestBody(id, size uint32, eos bool) uint32 {
	return uint32(onStream(id, cbRequestBody, size, eos))
}
func (nativeGuest) OnResponseHeaders(id, n uint32, eos bool) uint32 {
	return uint32(onStream(id, cbResponseHeaders, n, eos))
}
func (nativeGuest) OnResponseBody(id, size uint32, eos bool) uint32 {
	return uint32(onStream(id, cbResponseBody, size, eos))
}
func (nativeGuest) OnHttpCallResponse(root, call, headers, body, trailers uint32) {
	onHttpCallResponse(root, call, headers, body, trailers)
}
