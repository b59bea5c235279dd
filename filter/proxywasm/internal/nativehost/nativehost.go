// Package nativehost is the switchboard between the binding's native
// stand-in and the in-memory host that proxytest implements. It owns the
// Host and Guest interfaces at ABI level, the registration of the binding's
// callbacks, and the lock that decides which emulated VM is running.
//
// Every emulated VM is single-threaded, like an Envoy worker: a VM's lock
// is held for the whole of a callback. Go code of all emulated VMs runs
// under one global lock, so the binding can find the running VM in a
// package variable, as it does in a real wasm instance where it is alone.
// Shared-data calls release the global lock while the host serves them,
// so VMs on different goroutines interleave exactly where real workers
// can race: between a get and the set that follows it (RATIONALE.md, "Why
// does the native stand-in run every emulated VM under one lock?").
package nativehost

import (
	"sync"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

// Host is the host side of one emulated VM: one method per proxy-wasm host
// call, with Go types at the ABI's level of detail. Byte results must be
// fresh slices the caller may keep; byte arguments are only valid during
// the call.
type Host interface {
	Log(level uint32, msg string) uint32
	GetLogLevel() (uint32, uint32)
	SetTickPeriod(ms uint32) uint32
	SetEffectiveContext(id uint32) uint32
	Done() uint32
	GetBufferBytes(bt, start, max uint32) ([]byte, uint32)
	SetBufferBytes(bt, start, size uint32, data []byte) uint32
	GetBufferStatus(bt uint32) (length, flags, status uint32)
	GetHeaderMapPairs(mt uint32) ([]byte, uint32)
	SetHeaderMapPairs(mt uint32, data []byte) uint32
	GetHeaderMapSize(mt uint32) (uint32, uint32)
	GetHeaderMapValue(mt uint32, key string) ([]byte, uint32)
	AddHeaderMapValue(mt uint32, key, value string) uint32
	ReplaceHeaderMapValue(mt uint32, key, value string) uint32
	RemoveHeaderMapValue(mt uint32, key string) uint32
	ContinueStream(stream uint32) uint32
	CloseStream(stream uint32) uint32
	SendLocalResponse(status uint32, details string, body, headers []byte, grpcStatus int32) uint32
	HttpCall(upstream string, headers, body, trailers []byte, timeoutMs uint32) (uint32, uint32)
	// GetSharedData and SetSharedData are called without the global lock
	// (the VM's own lock is held): they must be safe for concurrent use
	// across VMs.
	GetSharedData(key string) ([]byte, uint32, uint32)
	SetSharedData(key string, value []byte, cas uint32) uint32
	DefineMetric(metricType uint32, name string) (uint32, uint32)
	IncrementMetric(id uint32, delta int64) uint32
	RecordMetric(id uint32, value uint64) uint32
	GetMetric(id uint32) (uint64, uint32)
	GetProperty(path []byte) ([]byte, uint32)
	SetProperty(path, value []byte) uint32
	GetStatus() (uint32, []byte, uint32)
	CallForeignFunction(name string, args []byte) ([]byte, uint32)
}

// Guest is the binding's side: the proxy_on_* callbacks with their ABI
// signatures, and the constructor of one VM's guest state.
type Guest interface {
	NewState(vm types.VMContext) any
	OnContextCreate(id, parent uint32)
	OnVMStart(root, size uint32) bool
	OnConfigure(root, size uint32) bool
	OnTick(root uint32)
	OnQueueReady(root, queue uint32)
	OnRequestHeaders(id, n uint32, eos bool) uint32
	OnRequestBody(id, size uint32, eos bool) uint32
	OnRequestTrailers(id, n uint32) uint32
	OnResponseHeaders(id, n uint32, eos bool) uint32
	OnResponseBody(id, size uint32, eos bool) uint32
	OnResponseTrailers(id, n uint32) uint32
	OnHttpCallResponse(root, call, headers, body, trailers uint32)
	OnLog(id uint32)
	OnDone(id uint32) bool
	OnDelete(id uint32)
}

// VM pairs one emulated VM's host with the binding's state for it.
type VM struct {
	Host  Host
	State any
	mu    sync.Mutex
}

var (
	gil     sync.Mutex
	current *VM
	guest   Guest
)

// Register installs the binding's callbacks. The binding calls it from its
// native init.
func Register(g Guest) { guest = g }

// Callbacks returns the registered binding, or nil when the binding is not
// linked in.
func Callbacks() Guest { return guest }

// Enter makes v the running VM: it takes v's lock, then the global lock.
func (v *VM) Enter() {
	v.mu.Lock()
	gil.Lock()
	current = v
}

// Exit undoes Enter.
func (v *VM) Exit() {
	current = nil
	gil.Unlock()
	v.mu.Unlock()
}

// Lock takes only v's lock, for reading v's host state from outside a
// callback.
func (v *VM) Lock() { v.mu.Lock() }

// Unlock undoes Lock.
func (v *VM) Unlock() { v.mu.Unlock() }

// Current returns the running VM, or nil outside a callback. Only the
// goroutine that entered a VM may call it.
func Current() *VM { return current }

// Release lets other VMs run while v's host serves a shared-data call;
// v's own lock stays held.
func Release(v *VM) {
	current = nil
	gil.Unlock()
}

// Reacquire undoes Release.
func Reacquire(v *VM) {
	gil.Lock()
	current = v
}
