package filter_test

import (
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/wasmtest"
)

// TestFilterCallsNothingWhileInitializingOrAllocating: V8 in Envoy traps a
// host call the guest makes during _initialize or proxy_on_memory_allocate
// that is not on cpp-host's short lists (wazero does not check). Under a
// host that traps on any import but the Go runtime's own WASI calls during
// _initialize, and on every import during the allocator, the real
// filter.wasm starts in every VM and serves the whole workload: its init()
// functions and its allocator call nothing of the host.
func TestFilterCallsNothingWhileInitializingOrAllocating(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamRPM), keys: []testKey{dev1Key}, accountant: true,
		phases: &wasmtest.PhaseCalls{Init: wasmtest.GoRuntimeInitCalls}})
	workload(t, r)
	init, alloc, allocations := r.h.PhaseCallCounts()
	if allocations < 1000 {
		t.Errorf("only %d allocations: the workload did not exercise the allocator", allocations)
	}
	for name := range init {
		if strings.HasPrefix(name, "env.") {
			t.Errorf("_initialize called %s", name)
		}
	}
	if len(alloc) != 0 {
		t.Errorf("the allocator called %v", alloc)
	}
	t.Logf("_initialize called %v over %d VMs; %d allocations called nothing", init, r.h.Workers()+1, allocations)
}
