package wasmtest

import (
	"sync/atomic"
	"time"
)

// Envoy's stream timeouts (the connection manager's stream_idle_timeout
// and request_timeout). Their timers run on the host's clock; when one
// fires it wakes the stream's driver, which ends the stream as Envoy does:
// a 408 local reply (through the filter's response callbacks) while no
// response has started, a reset once one has. Either way the filter sees
// the stream end (proxy_on_log), so what it holds for the request (a
// concurrency lease, a reserve) goes back.

// DefaultStreamIdleTimeout is Envoy's default stream_idle_timeout.
const DefaultStreamIdleTimeout = 5 * time.Minute

// streamTimers are one stream's timers.
type streamTimers struct {
	idle, request Timer
	idleGen       int          // the driver's generation of the idle timer
	idleFired     atomic.Int64 // the generation that fired last
	requestFired  atomic.Bool
}

// armIdle (re)starts the idle timer: the stream saw activity. Driver
// goroutine only.
func (s *stream) armIdle() {
	d := s.h.idleTimeout
	if d <= 0 {
		return
	}
	t := &s.px.timers
	if t.idle != nil {
		t.idle.Stop()
	}
	t.idleGen++
	gen := int64(t.idleGen)
	t.idle = s.h.clock.AfterFunc(d, func() {
		t.idleFired.Store(gen)
		s.notify()
	})
}

// armRequest starts the request timer (once, at the request headers).
func (s *stream) armRequest() {
	d := s.h.requestTimeout
	if d <= 0 || s.req.gotEOS {
		return
	}
	t := &s.px.timers
	t.request = s.h.clock.AfterFunc(d, func() {
		t.requestFired.Store(true)
		s.notify()
	})
}

// stopTimers stops both timers (the stream ended).
func (s *stream) stopTimers() {
	t := &s.px.timers
	if t.idle != nil {
		t.idle.Stop()
	}
	if t.request != nil {
		t.request.Stop()
	}
}

// checkTimers ends the stream when a timer fired and still applies (VM
// locked): the idle timer's latest generation, or the request timer while
// the request is incomplete.
func (s *stream) checkTimers() {
	t := &s.px.timers
	switch {
	case s.h.idleTimeout > 0 && t.idleFired.Load() == int64(t.idleGen):
		s.timeout("stream_idle_timeout", "stream timeout")
	case t.requestFired.Load() && !s.req.gotEOS && s.req.state != dsDone:
		t.requestFired.Store(false)
		s.timeout("request_overall_timeout", "request timeout")
	}
}

// timeout ends the stream for a timer: 408 while no response has started,
// else a reset.
func (s *stream) timeout(details, body string) {
	if s.px.ending {
		return
	}
	s.h.logs.add(s.v.index, s.v.name, LogDebug, "stream ended by "+details)
	if s.respBegun {
		s.details = details
		s.resetStream()
		return
	}
	s.localReply(&localReply{status: 408, body: []byte(body), details: details})
}
