package wasmtest

import "testing"

// TestPanicUnderEitherPollAnswer: a Go panic freezes the world, which
// sleeps in poll_oneoff. Answered ENOSYS (Envoy through cpp-host PR #427)
// the runtime dies inside the panic and prints no value; answered success
// with no event (current cpp-host) it prints the panic value. The VM fails
// closed either way.
func TestPanicUnderEitherPollAnswer(t *testing.T) {
	for _, c := range []struct {
		mode       PollMode
		want, none string
	}{
		{PollENOSYS, "panic during panic", "boom in request headers"},
		{PollNoEvents, "boom in request headers", "panic during panic"}, // each write a line, as Envoy logs them
	} {
		h := newHost(t, Config{PollOneoff: c.mode})
		resp := h.Do(Request{Headers: hdr("X-Mode", "trap")})
		if failed, _ := h.Failed(1); !failed || resp.Status != 503 {
			t.Errorf("mode %d: %d, failed %v", c.mode, resp.Status, failed)
		}
		if !hasLog(h, c.want) || hasLog(h, c.none) {
			t.Errorf("mode %d: want a log line with %q and none with %q; logs:\n%v", c.mode, c.want, c.none, h.Logs())
		}
	}
}
