package wasmtest

import "sort"

// PhaseCalls narrows what the guest may call while _initialize runs (Init)
// and while its allocator runs (Alloc), as "module.name" ("env.proxy_log",
// "wasi_snapshot_preview1.clock_time_get"); any other import called then
// traps with restricted_callback, as V8 in Envoy traps. Without it the host
// allows what proxy-wasm-cpp-host's restricted-callback lists allow; with
// it, a test holds a module to exactly the calls it expects (the Go
// runtime's own, say, and none of the filter's).
type PhaseCalls struct {
	Init, Alloc []string
}

// phaseAllowed reports whether the import called name may run in the
// current restricted phase of v.
func (v *vm) phaseAllowed(name string, allow uint8) bool {
	p := v.h.cfg.PhaseCalls
	if p == nil {
		return v.restrict&allow != 0
	}
	list := p.Init
	if v.restrict&restrictAlloc != 0 {
		list = p.Alloc
	}
	for _, n := range list {
		if n == name {
			return true
		}
	}
	return false
}

// notePhaseCall counts an import called during a restricted phase.
func (v *vm) notePhaseCall(name string) {
	v.h.phaseMu.Lock()
	defer v.h.phaseMu.Unlock()
	m := &v.h.phaseInit
	if v.restrict&restrictAlloc != 0 {
		m = &v.h.phaseAlloc
	}
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[name]++
}

// PhaseCallCounts returns, for every VM of the host so far, how many times
// each import was called while _initialize ran and while the guest
// allocator ran, and how many allocations there were.
func (h *Host) PhaseCallCounts() (init, alloc map[string]int, allocations int) {
	h.phaseMu.Lock()
	defer h.phaseMu.Unlock()
	cp := func(m map[string]int) map[string]int {
		out := make(map[string]int, len(m))
		for k, n := range m {
			out[k] = n
		}
		return out
	}
	return cp(h.phaseInit), cp(h.phaseAlloc), int(h.allocations.Load())
}

// sortedNames lists m's keys in order, for messages.
func sortedNames(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// GoRuntimeInitCalls are the WASI imports the Go runtime's own _initialize
// calls in a wasip1 reactor (shared/proxy-wasm.md 2.1): its clock, its
// random seed, its arguments and environment, the flags of fds 0 to 2 and
// the preopened directories. A module whose init() functions call nothing
// starts with these alone.
var GoRuntimeInitCalls = []string{
	"wasi_snapshot_preview1.clock_time_get",
	"wasi_snapshot_preview1.random_get",
	"wasi_snapshot_preview1.args_sizes_get",
	"wasi_snapshot_preview1.args_get",
	"wasi_snapshot_preview1.environ_sizes_get",
	"wasi_snapshot_preview1.environ_get",
	"wasi_snapshot_preview1.fd_fdstat_get",
	"wasi_snapshot_preview1.fd_fdstat_set_flags",
	"wasi_snapshot_preview1.fd_prestat_get",
	"wasi_snapshot_preview1.fd_prestat_dir_name",
}
