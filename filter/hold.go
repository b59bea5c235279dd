package filter

import "time"

// Holding a governed request's headers until gate 2 (hold_headers) needs a
// host that keeps delivering the body to a filter paused at the headers:
// Envoy's StopIteration, which Envoy 1.35 and later give a Wasm filter
// with allow_on_headers_stop_iteration: true. Any other host holds the body
// back too (StopAllIterationAndWatermark), and the request would wait for a
// body that never comes. The binding therefore watches every request it
// holds: one that no body callback has reached after HoldGrace is let go
// (ReleaseStalled), and a VM that has never seen a held request's body
// stops holding.

// HoldGrace is how long a held request may go without a body callback.
const HoldGrace = 10 * time.Second

// Holding reports whether the stream's headers wait for gate 2.
func (s *Stream) Holding() bool { return s.held && !s.forwarded && !s.replied }

// ReleaseStalled lets a held request whose body never reached the filter
// go on: its headers lose their length (gate 2 may still change the body,
// which the host delivers to a filter once it resumes) and go upstream as
// they would without hold_headers. The binding applies the verdict on the
// stream and resumes it.
func (e *Engine) ReleaseStalled(s *Stream) Verdict {
	s.held = false
	if !e.holdSeen && !e.holdBroken {
		e.holdBroken = true
		e.logf(LogError, "tokentriage: hold_headers is on, but no body reached a request paused at its headers for %v: "+
			"this host holds the body back from a paused filter. Set allow_on_headers_stop_iteration: true in the Wasm "+
			"filter's config (Envoy 1.35 or later), or turn hold_headers off. Until then this VM lets the headers of "+
			"governed requests go at gate 1", HoldGrace)
	} else {
		e.logf(LogWarn, "tokentriage: request %s: no body for %v after its headers; letting them go before gate 2", s.id, HoldGrace)
	}
	return Verdict{RemoveHeaders: append(e.removeScratch[:0], "content-length")}
}
