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
// stops holding, with an error naming the fix. It tries again every
// HoldRetry, holding one request: on a host without the knob that request
// waits HoldGrace and the error is logged again; when its body comes (the
// first stall was a client that sent its headers and then nothing, not
// the host) the VM holds again from then on. So no single slow client can
// turn holding off for good.

// HoldGrace is how long a held request may go without a body callback.
const HoldGrace = 10 * time.Second

// HoldRetry is how long a VM that stopped holding waits before it holds a
// request again to see whether the host delivers its body.
const HoldRetry = 10 * time.Minute

// sawHeldBody records that a body reached a request held at its headers:
// the host honours hold_headers.
func (e *Engine) sawHeldBody() {
	e.holdSeen = true
	e.holdBrokenAt = time.Time{}
}

// Holding reports whether the stream's headers wait for gate 2.
func (s *Stream) Holding() bool { return s.held && !s.forwarded && !s.replied }

// ReleaseStalled lets a held request whose body never reached the filter
// go on: its headers lose their length (gate 2 may still change the body,
// which the host delivers to a filter once it resumes) and go upstream as
// they would without hold_headers. The binding applies the verdict on the
// stream and resumes it.
func (e *Engine) ReleaseStalled(s *Stream) Verdict {
	s.held = false
	now := e.host.Now()
	if !e.holdSeen && (e.holdBrokenAt.IsZero() || now.Sub(e.holdBrokenAt) >= HoldRetry) {
		// The first stall, or the retry's: said once each, not once per
		// request held meanwhile.
		e.holdBrokenAt = now
		e.logf(LogError, "tokentriage: hold_headers is on, but no body reached a request paused at its headers for %v: "+
			"this host holds the body back from a paused filter. Set allow_on_headers_stop_iteration: true in the Wasm "+
			"filter's config (Envoy 1.35 or later), or turn hold_headers off. Until then this VM lets the headers of "+
			"governed requests go at gate 1, holding one request every %v to try again", HoldGrace, HoldRetry)
	} else {
		e.logf(LogWarn, "tokentriage: request %s: no body for %v after its headers; letting them go before gate 2", s.id, HoldGrace)
	}
	return Verdict{RemoveHeaders: append(e.removeScratch[:0], "content-length")}
}
