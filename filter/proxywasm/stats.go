package proxywasm

import "sync/atomic"

var (
	hostCalls     atomic.Uint64
	sharedDataOps atomic.Uint64
	panics        atomic.Uint64
)

// HostCalls returns how many proxy_* host calls this VM has made (natively:
// every emulated VM of the process together). It costs one load, so
// benchmarks read it before and after a request.
func HostCalls() uint64 { return hostCalls.Load() }

// SharedDataOps returns how many of those host calls were
// proxy_get_shared_data or proxy_set_shared_data.
func SharedDataOps() uint64 { return sharedDataOps.Load() }

// Panics returns how many panics the binding recovered in callbacks.
func Panics() uint64 { return panics.Load() }
