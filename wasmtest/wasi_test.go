package wasmtest

import (
	"strconv"
	"testing"
	"time"
)

// The WASI calls answer as Envoy's do (shared/proxy-wasm.md 2.1): random_get
// refuses more than 64 KiB, the clocks are the host's, other clocks are
// ENOTSUP, proc_exit returns, stdout is an info log line, unknown fds are
// EBADF, poll_oneoff is ENOSYS.
func TestWASIAnswersLikeEnvoy(t *testing.T) {
	clock := NewManualClock(t0)
	h := newHost(t, Config{Clock: clock})
	clock.Advance(1500 * time.Millisecond)
	resp := h.Do(Request{Headers: hdr("X-Mode", "wasi")})
	want := "random-big=28 random=0 realtime=0:" + strconv.FormatInt(t0.Add(1500*time.Millisecond).UnixNano(), 10) +
		" monotonic=0:2500000000 cputime=58 after-exit=alive fd1=0:10 fd5=8 fdstat0=8 fdstat2=0:64 poll=52"
	if got := string(resp.Body); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var stdout, exit bool
	for _, e := range h.Logs() {
		if e.Message == "to stdout" && e.Level == LogInfo {
			stdout = true
		}
		if e.Message == "wasi proc_exit(3) called; the host does not exit the VM" && e.Level == LogError {
			exit = true
		}
	}
	if !stdout || !exit {
		t.Errorf("stdout logged %v, proc_exit logged %v: %v", stdout, exit, h.Logs())
	}
}
