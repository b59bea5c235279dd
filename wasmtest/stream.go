package wasmtest

import (
	"strconv"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// dirState is where one direction of a stream stands with respect to this
// filter, in Envoy's terms (shared/proxy-wasm.md 3.2).
type dirState uint8

const (
	dsIdle           dirState = iota // headers not yet seen
	dsStopAll                        // headers paused: body and trailers are held without callbacks
	dsBuffer                         // body paused: the next body callback reports the whole buffer
	dsTrailersPaused                 // trailers paused: body and trailers held
	dsIterating                      // passing through chunk by chunk
	dsDone                           // everything released past the filter
)

// direction is the request or the response side of a stream.
type direction struct {
	resp       bool
	state      dirState
	hdr        hmap
	hdrOK      bool // the header map is reachable (own callback, or paused there)
	hdrHeld    bool // paused with StopIteration: the body flows to the filter, the headers wait
	trl        hmap
	hasTrl     bool // trailers exist (arrived or created at end of stream)
	trlOK      bool
	trlHeld    bool // trailers arrived and await delivery to the filter
	body       []byte
	bodyOK     bool // the body buffer is reachable
	eosBody    bool // inside a body callback with end_of_stream: trailers may be created
	gotEOS     bool // the source has ended
	headersEOS bool
	changed    bool  // the filter changed the body
	size       int64 // body bytes received from the source
}

// action is a deferred host call: it takes effect after the VM call returns.
type action struct {
	kind    uint8
	reply   *localReply
	closeIt bool
}

const (
	actContinueRequest uint8 = iota
	actContinueResponse
	actLocalReply
	actClose
)

// localReply is a pending proxy_send_local_response (or a host reply).
type localReply struct {
	status  int
	body    []byte
	headers hmap
	details string
	grpc    int32
}

// stream is one HTTP exchange: an HTTP context in the VM plus the proxy
// state around it. Fields below "filter-facing" are touched only with the
// VM locked; the driver goroutine owns the rest.
type stream struct {
	h  *Host
	v  *vm
	id uint32

	// filter-facing
	created    bool
	req, resp  direction
	actions    []action
	localHold  bool // send_local_response was called once already
	respBegun  bool // response headers went into the filter chain
	fromLocal  bool // the response is a local reply
	bypass     bool // fail-open after a trap: callbacks are skipped
	failedDone bool // the VM failure has been handled for this stream
	ended      bool // on_log/on_done/on_delete ran (or are skipped)
	inLog      bool
	props      map[string][]byte // proxy_set_property (filter state wasm.*)
	rt         *route            // the route chosen (see currentRoute)
	rtState    routeState
	details    string // response code details
	counts     Counts

	// request facts for properties
	method, proto         string
	start                 time.Time
	remoteAddr, localAddr string
	reqHeaderBytes        int

	// proxy side (driver goroutine)
	px proxyState
}

func (s *stream) dir(resp bool) *direction {
	if resp {
		return &s.resp
	}
	return &s.req
}

// begin creates the HTTP context and delivers the request headers.
func (s *stream) begin(hdr hmap, eos bool) {
	v := s.v
	s.req.hdr = hdr
	s.req.headersEOS = eos
	if eos {
		s.req.gotEOS = true
	}
	if v.failed.Load() {
		s.handleFailure()
		return
	}
	s.chooseRoute() // Envoy picks the route before the filter chain runs
	s.id = v.nextID
	v.nextID++
	v.streams[s.id] = s
	v.enterStream(s)
	if _, ok := v.call(v.fn.create, "proxy_on_context_create", uint64(s.id), uint64(v.rootID)); !ok {
		s.handleFailure()
		return
	}
	s.created = true
	s.headers(&s.req, eos)
}

// callAction runs an HTTP callback and maps its result to an action. After a
// trap it answers as cpp-host's CHECK_FAIL_HTTP: Continue when failing open,
// a stop otherwise (the failure handling then replies 503). After
// send_local_response the result is a stop whatever the guest returned.
func (s *stream) callAction(fn api.Function, what string, args ...uint64) uint64 {
	v := s.v
	if s.bypass || !s.created {
		return actionContinue
	}
	if v.failed.Load() {
		if s.h.cfg.FailOpen {
			return actionContinue
		}
		return actionPause
	}
	local := s.localHold
	v.enterStream(s)
	r, ok := v.call(fn, what, args...)
	if !ok {
		if s.h.cfg.FailOpen {
			return actionContinue
		}
		return actionPause
	}
	if !local && s.localHold {
		return actionPause
	}
	if r != actionContinue {
		return actionPause
	}
	return actionContinue
}

// headers delivers d's headers to the filter.
func (s *stream) headers(d *direction, eos bool) {
	v := s.v
	d.hdrOK = true
	fn, what := v.fn.reqHeaders, "proxy_on_request_headers"
	if d.resp {
		fn, what = v.fn.respHeaders, "proxy_on_response_headers"
	}
	a := s.callAction(fn, what, uint64(s.id), uint64(len(d.hdr)), b2u(eos))
	if a == actionContinue {
		d.hdrOK = false
		s.releaseHeaders(d)
		d.state = dsIterating
		if eos {
			d.state = dsDone
			s.releaseEnd(d)
		}
		return
	}
	if s.h.cfg.AllowOnHeadersStopIteration && !eos && !s.localHold && !s.v.failed.Load() {
		// Envoy's StopIteration: the headers wait (and stay writable)
		// while the body keeps coming to this filter; they go on when a
		// body or trailers callback continues, or the stream is resumed.
		d.hdrHeld = true
		d.state = dsIterating
		return
	}
	d.state = dsStopAll
}

// releaseHeld lets headers held by StopIteration go on, before anything
// that follows them.
func (s *stream) releaseHeld(d *direction) {
	if d.hdrHeld {
		d.hdrHeld = false
		d.hdrOK = false
		s.releaseHeaders(d)
	}
}

// data feeds a chunk from the source into d.
func (s *stream) data(d *direction, chunk []byte, eos bool) {
	d.size += int64(len(chunk))
	if eos {
		d.gotEOS = true
	}
	switch d.state {
	case dsStopAll:
		d.body = append(d.body, chunk...)
	case dsBuffer:
		d.body = append(d.body, chunk...)
		if len(d.body) > s.h.bufferLimit {
			s.overflow(d)
			return
		}
		s.bodyCall(d, eos)
	case dsIterating:
		if len(d.body) == 0 {
			d.body = chunk
		} else {
			d.body = append(d.body, chunk...)
		}
		s.bodyCall(d, eos)
	}
}

// trailers feeds the source's trailers into d (they end the source).
func (s *stream) trailers(d *direction, trl hmap) {
	d.trl = trl
	d.hasTrl = true
	d.gotEOS = true
	switch d.state {
	case dsStopAll:
		d.trlHeld = true
	case dsBuffer, dsIterating:
		s.trailersCall(d)
	}
}

// bodyCall runs the body callback over d.body.
func (s *stream) bodyCall(d *direction, eos bool) {
	v := s.v
	fn, what := v.fn.reqBody, "proxy_on_request_body"
	if d.resp {
		fn, what = v.fn.respBody, "proxy_on_response_body"
	}
	d.bodyOK = true
	d.eosBody = eos
	a := s.callAction(fn, what, uint64(s.id), uint64(len(d.body)), b2u(eos))
	d.eosBody = false
	if a == actionContinue {
		s.releaseHeld(d)
		d.bodyOK = false
		s.releaseBody(d)
		if eos {
			d.state = dsDone
			s.releaseEnd(d)
			return
		}
		d.state = dsIterating
		return
	}
	d.state = dsBuffer
}

// trailersCall runs the trailers callback.
func (s *stream) trailersCall(d *direction) {
	v := s.v
	fn, what := v.fn.reqTrailers, "proxy_on_request_trailers"
	if d.resp {
		fn, what = v.fn.respTrailers, "proxy_on_response_trailers"
	}
	d.trlHeld = false
	d.trlOK = true
	a := s.callAction(fn, what, uint64(s.id), uint64(len(d.trl)))
	if a == actionContinue {
		s.releaseHeld(d)
		d.trlOK = false
		d.bodyOK = false
		s.releaseBody(d)
		s.releaseEnd(d)
		d.state = dsDone
		return
	}
	d.state = dsTrailersPaused
}

// resume is proxy_continue_stream for d, taking effect after the VM call.
func (s *stream) resume(d *direction) {
	switch d.state {
	case dsStopAll:
		d.hdrOK = false
		s.releaseHeaders(d)
		d.state = dsIterating
		if d.headersEOS {
			d.state = dsDone
			s.releaseEnd(d)
			return
		}
		// Envoy resumes a filter that stopped all iteration from the filter
		// itself: it sees the body buffered meanwhile in one callback.
		if len(d.body) > 0 || (d.gotEOS && !d.hasTrl) {
			s.bodyCall(d, d.gotEOS && !d.hasTrl)
			if d.state != dsIterating && d.state != dsDone {
				return
			}
		}
		if d.trlHeld {
			s.trailersCall(d)
		}
	case dsIterating:
		s.releaseHeld(d)
	case dsBuffer:
		s.releaseHeld(d)
		d.bodyOK = false
		s.releaseBody(d)
		d.state = dsIterating
		if d.gotEOS && !d.hasTrl {
			d.state = dsDone
			s.releaseEnd(d)
		}
	case dsTrailersPaused:
		s.releaseHeld(d)
		d.trlOK = false
		d.bodyOK = false
		s.releaseBody(d)
		s.releaseEnd(d)
		d.state = dsDone
	}
}

// overflow is Envoy's buffer limit: 413 for a request, 500 for a response
// whose headers have not left, a reset otherwise.
func (s *stream) overflow(d *direction) {
	s.h.logs.add(s.v.index, s.v.name, LogWarn, "buffered body over the "+strconv.Itoa(s.h.bufferLimit)+"-byte limit")
	if !d.resp {
		s.localReply(&localReply{status: 413, body: []byte("Payload Too Large"), details: "request_payload_too_large"})
		return
	}
	s.localReply(&localReply{status: 500, body: []byte("Internal Server Error"), details: "response_payload_too_large"})
}

// settle runs the stream's deferred actions and reacts to a VM failure,
// until nothing is left to do. Called with the VM locked, by the driver.
func (s *stream) settle() {
	for !s.px.ending {
		if s.v.failed.Load() && !s.failedDone {
			s.handleFailure()
			continue
		}
		if len(s.actions) == 0 {
			return
		}
		a := s.actions[0]
		copy(s.actions, s.actions[1:])
		s.actions = s.actions[:len(s.actions)-1]
		switch a.kind {
		case actContinueRequest:
			s.resume(&s.req)
		case actContinueResponse:
			s.resume(&s.resp)
		case actLocalReply:
			s.localReply(a.reply)
		case actClose:
			s.details = "wasm_close_stream"
			s.resetStream()
		}
	}
}

// handleFailure applies the failure policy to a stream whose VM failed.
func (s *stream) handleFailure() {
	s.failedDone = true
	s.actions = s.actions[:0]
	if s.h.cfg.FailOpen {
		s.bypass = true
		if s.req.state == dsIdle {
			s.releaseHeaders(&s.req)
			s.req.state = dsIterating
			if s.req.headersEOS {
				s.req.state = dsDone
				s.releaseEnd(&s.req)
			}
		} else {
			s.resume(&s.req)
		}
		s.resume(&s.resp)
		return
	}
	s.bypass = true
	s.localReply(&localReply{status: 503, details: "wasm_fail_stream", grpc: 14})
}

// localReply is Envoy's sendLocalReply: through this filter's response
// callbacks while the response has not begun, a direct reply while it has
// begun but not reached the client, and a reset after that.
func (s *stream) localReply(lr *localReply) {
	if s.px.ending {
		return
	}
	s.details = lr.details
	s.req.state = dsDone
	s.req.hdrOK, s.req.bodyOK, s.req.trlOK, s.req.hdrHeld = false, false, false, false
	s.cancelUpstream()
	if !s.respBegun {
		s.respBegun = true
		s.fromLocal = true
		hdr := make(hmap, 0, len(lr.headers)+3)
		hdr = append(hdr, hpair{":status", strconv.Itoa(lr.status)})
		hdr = append(hdr, lr.headers...)
		if len(lr.body) > 0 {
			hdr.replace("content-length", strconv.Itoa(len(lr.body)))
			if _, ok := hdr.get("content-type"); !ok {
				hdr = append(hdr, hpair{"content-type", "text/plain"})
			}
		}
		s.resp = direction{resp: true, hdr: hdr, headersEOS: len(lr.body) == 0}
		if len(lr.body) == 0 {
			s.resp.gotEOS = true
		}
		s.headers(&s.resp, len(lr.body) == 0)
		if len(lr.body) > 0 && !s.px.ending && s.fromLocal {
			s.data(&s.resp, lr.body, true)
		}
		return
	}
	s.directReply(lr)
}

// b2u encodes a bool as a wasm i32.
func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
