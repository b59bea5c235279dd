package wasmtest

// PollMode is how WASI poll_oneoff answers (Config.PollOneoff). The Go
// runtime calls it to sleep (runtime.usleep, in a panic's freeze of the
// world and in spin loops) and to wait for timers when no goroutine can
// run (netpoll); either way it treats an error as fatal. See
// RATIONALE.md#what-does-the-filters-go-runtime-do-with-poll_oneoff.
type PollMode uint8

const (
	// PollENOSYS answers ENOSYS (52), as Envoy 1.33 and later did through
	// proxy-wasm-cpp-host PR #427: the runtime throws ("fatal error:
	// wasi_snapshot_preview1.poll_oneoff") the first time it sleeps.
	PollENOSYS PollMode = iota
	// PollNoEvents answers success with no event written, as current
	// proxy-wasm-cpp-host does: a sleep returns at once, and a wait for a
	// timer spins on the clock until it is due.
	PollNoEvents
)

func wasiPollOneoff(v *vm, s []uint64) {
	if v.h.cfg.PollOneoff != PollNoEvents {
		s[0] = errnoNosys
		return
	}
	if !v.putU32(uint32(s[3]), 0) {
		s[0] = errnoFault
		return
	}
	s[0] = errnoSuccess
}
