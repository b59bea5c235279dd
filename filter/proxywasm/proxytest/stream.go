package proxytest

import (
	"strconv"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
)

// stream is the host's view of one HTTP stream. Each header map and body
// has its current value and a "live" flag: whether the filter can reach it
// now. Envoy keeps a map reachable while its callback runs and, after
// that, only while the callback's Pause holds it (and drops every request
// map on proxy_continue_stream).
type stream struct {
	id uint32

	req, resp flow

	respStarted bool
	inLog       bool

	action types.Action

	pendingLocal *LocalHttpResponse
	local        *LocalHttpResponse
	pendingReset bool
	routeClears  int // clear_route_cache calls
	reset        bool
	touched      bool
	finished     bool

	props map[string][]byte
}

// flow is one direction of a stream, the request or the response: its
// header maps and body with their live flags, and what the host holds
// while the headers callback's Pause stands.
type flow struct {
	response bool

	headers, trailers         [][2]string
	headersLive, trailersLive bool

	body      []byte // buffered, not yet passed on
	forwarded []byte // passed on upstream / downstream
	bodyLive  bool
	buffering bool
	eos       bool
	inBody    bool
	paused    bool // a headers callback returned Pause
	resume    bool // proxy_continue_stream, applied after the VM call

	held         []byte
	heldEOS      bool
	heldData     bool
	heldTrailers [][2]string
}

// LocalHttpResponse is a local reply the filter sent with
// proxywasm.SendHttpResponse, as it gave it. What the client finally sees
// (after the filter's response callbacks ran on it, with :status and
// content-length added) is in GetCurrentResponseHeaders and
// GetCurrentResponseBody.
type LocalHttpResponse struct {
	StatusCode       uint32
	StatusCodeDetail string
	Data             []byte
	Headers          [][2]string
	GRPCStatus       int32
}

func (h *vmHost) touch(s *stream) {
	if !s.touched {
		s.touched = true
		h.touched = append(h.touched, s)
	}
}

// InitializeHttpContext creates an HTTP context under the plugin context
// (proxy_on_context_create) and returns its id.
func (e *Emulator) InitializeHttpContext() uint32 {
	e.nv.Enter()
	defer e.nv.Exit()
	h := e.h
	id := h.allocID()
	s := &stream{id: id}
	s.resp.response = true
	h.streams[id] = s
	h.effective = id
	e.guest().OnContextCreate(id, h.rootID)
	h.effective = 0
	e.afterCall()
	return id
}

// enterStream finds a live stream for a callback; ok is false for an
// unknown or completed stream, or one a local reply or reset has ended.
func (e *Emulator) enterStream(id uint32) (*stream, bool) {
	s := e.h.streams[id]
	if s == nil || s.finished || s.reset {
		return nil, false
	}
	return s, true
}

func (e *Emulator) run(s *stream, f func() uint32) types.Action {
	h := e.h
	prev := h.effective
	h.effective = s.id
	act := types.Action(f())
	h.effective = prev
	s.action = act
	return act
}

// CallOnRequestHeaders delivers request headers (keys are lower-cased, as
// Envoy does). It returns the action the stream ends up with: Pause after
// a local reply.
func (e *Emulator) CallOnRequestHeaders(id uint32, headers [][2]string, endOfStream bool) types.Action {
	return e.callStream(id, func(s *stream) bool { return e.deliverHeaders(s, &s.req, headers, endOfStream) })
}

// CallOnRequestBody delivers a request body chunk. After a Pause from the
// body callback the host buffers, so the next call's bodySize is the whole
// buffered body. While the request headers are paused, data is held and
// delivered when the filter resumes the request.
func (e *Emulator) CallOnRequestBody(id uint32, body []byte, endOfStream bool) types.Action {
	return e.callStream(id, func(s *stream) bool { return e.deliverBody(s, &s.req, body, endOfStream) })
}

// CallOnRequestTrailers delivers request trailers.
func (e *Emulator) CallOnRequestTrailers(id uint32, trailers [][2]string) types.Action {
	return e.callStream(id, func(s *stream) bool { return e.deliverTrailers(s, &s.req, trailers) })
}

// CallOnResponseHeaders delivers the upstream's response headers.
func (e *Emulator) CallOnResponseHeaders(id uint32, headers [][2]string, endOfStream bool) types.Action {
	return e.callStream(id, func(s *stream) bool { return e.deliverHeaders(s, &s.resp, headers, endOfStream) })
}

// CallOnResponseBody delivers a response body chunk, with the same
// buffering as CallOnRequestBody.
func (e *Emulator) CallOnResponseBody(id uint32, body []byte, endOfStream bool) types.Action {
	return e.callStream(id, func(s *stream) bool { return e.deliverBody(s, &s.resp, body, endOfStream) })
}

// CallOnResponseTrailers delivers response trailers.
func (e *Emulator) CallOnResponseTrailers(id uint32, trailers [][2]string) types.Action {
	return e.callStream(id, func(s *stream) bool { return e.deliverTrailers(s, &s.resp, trailers) })
}

// callStream runs one of the proxy's stream deliveries: none on a stream
// that has ended or sent a local reply (Pause). deliver reports whether it
// called the filter; data held behind paused headers did not (Pause).
func (e *Emulator) callStream(id uint32, deliver func(*stream) bool) types.Action {
	e.nv.Enter()
	defer e.nv.Exit()
	s, ok := e.enterStream(id)
	if !ok || s.local != nil {
		return types.ActionPause
	}
	if !deliver(s) {
		return types.ActionPause
	}
	e.afterCall()
	return s.action
}

// deliverHeaders runs the headers callback.
func (e *Emulator) deliverHeaders(s *stream, f *flow, headers [][2]string, eos bool) bool {
	e.headers(s, f, lowerPairs(headers), eos)
	return true
}

// deliverBody holds a body chunk while the flow's headers are paused, else
// runs the body callback on it.
func (e *Emulator) deliverBody(s *stream, f *flow, body []byte, eos bool) bool {
	if f.paused {
		f.held = append(f.held, body...)
		f.heldEOS = eos
		f.heldData = true
		return false
	}
	e.body(s, f, body, eos)
	return true
}

// deliverTrailers is deliverBody for trailers.
func (e *Emulator) deliverTrailers(s *stream, f *flow, trailers [][2]string) bool {
	if f.paused {
		f.heldTrailers = lowerPairs(trailers)
		if f.heldTrailers == nil {
			f.heldTrailers = [][2]string{}
		}
		return false
	}
	e.trailers(s, f, lowerPairs(trailers))
	return true
}

func (e *Emulator) headers(s *stream, f *flow, headers [][2]string, eos bool) {
	if f.response {
		s.respStarted = true
	}
	f.headers = headers
	f.headersLive = true
	f.eos = eos
	act := e.run(s, func() uint32 {
		if f.response {
			return e.guest().OnResponseHeaders(s.id, uint32(len(headers)), eos)
		}
		return e.guest().OnRequestHeaders(s.id, uint32(len(headers)), eos)
	})
	if act == types.ActionContinue {
		f.headersLive = false
	} else {
		f.paused = true
	}
}

func (e *Emulator) body(s *stream, f *flow, body []byte, eos bool) {
	if f.buffering {
		f.body = append(f.body, body...)
	} else {
		f.body = clone(body)
		if f.body == nil {
			f.body = []byte{}
		}
	}
	f.bodyLive = true
	f.eos = eos
	f.inBody = true
	act := e.run(s, func() uint32 {
		if f.response {
			return e.guest().OnResponseBody(s.id, uint32(len(f.body)), eos)
		}
		return e.guest().OnRequestBody(s.id, uint32(len(f.body)), eos)
	})
	f.inBody = false
	f.buffering = false
	if act == types.ActionContinue {
		f.forwarded = append(f.forwarded, f.body...)
		f.body = nil
		f.bodyLive = false
	} else {
		f.buffering = true
	}
}

func (e *Emulator) trailers(s *stream, f *flow, trailers [][2]string) {
	f.trailers = trailers
	f.trailersLive = true
	act := e.run(s, func() uint32 {
		if f.response {
			return e.guest().OnResponseTrailers(s.id, uint32(len(trailers)))
		}
		return e.guest().OnRequestTrailers(s.id, uint32(len(trailers)))
	})
	if act == types.ActionContinue {
		f.trailersLive = false
	}
}

// CompleteHttpContext ends the stream as Envoy does: proxy_on_log (the
// filter's OnHttpStreamDone), proxy_on_done, proxy_on_delete. The stream's
// state is gone afterwards; read it back before.
func (e *Emulator) CompleteHttpContext(id uint32) {
	e.nv.Enter()
	defer e.nv.Exit()
	s := e.h.streams[id]
	if s == nil || s.finished {
		return
	}
	e.complete(s)
	e.afterCall()
}

func (e *Emulator) complete(s *stream) {
	h := e.h
	prev := h.effective
	h.effective = s.id
	s.inLog = true
	e.guest().OnLog(s.id)
	s.inLog = false
	e.guest().OnDone(s.id)
	e.guest().OnDelete(s.id)
	s.finished = true
	h.effective = prev
	delete(h.streams, s.id)
}

// resume applies a deferred proxy_continue_stream on one flow: the
// buffered body goes on (upstream for the request, downstream for the
// response), and data held behind paused headers is delivered to the
// filter now.
func (e *Emulator) resume(s *stream, f *flow) {
	s.action = types.ActionContinue
	f.forwarded = append(f.forwarded, f.body...)
	f.body = nil
	f.buffering = false
	if !f.paused {
		return
	}
	f.paused = false
	if f.heldData {
		body, eos := f.held, f.heldEOS
		f.held, f.heldData = nil, false
		e.body(s, f, body, eos)
	}
	if t := f.heldTrailers; t != nil && !f.buffering && s.local == nil && s.pendingLocal == nil {
		f.heldTrailers = nil
		e.trailers(s, f, t)
	}
}

// sendLocal delivers a local reply: the stream stops, and if the response
// has not reached this filter yet, the reply's headers and body run
// through its OnHttpResponseHeaders and OnHttpResponseBody (Envoy issue
// #11447).
func (e *Emulator) sendLocal(s *stream, lr *LocalHttpResponse) {
	s.local = lr
	s.action = types.ActionPause
	s.req.bodyLive, s.req.headersLive, s.req.trailersLive = false, false, false
	s.req.paused, s.req.heldData, s.req.heldTrailers = false, false, nil
	headers := make([][2]string, 0, len(lr.Headers)+3)
	headers = append(headers, [2]string{":status", strconv.FormatUint(uint64(lr.StatusCode), 10)})
	headers = append(headers, lr.Headers...)
	if len(lr.Data) > 0 {
		headers = append(headers, [2]string{"content-length", strconv.Itoa(len(lr.Data))})
		if _, ok := firstValue(headers, "content-type"); !ok {
			headers = append(headers, [2]string{"content-type", "text/plain"})
		}
	}
	if s.respStarted {
		s.resp.headers = headers
		s.resp.forwarded = clone(lr.Data)
		return
	}
	s.resp.paused, s.resp.buffering = false, false
	s.resp.body, s.resp.forwarded = nil, nil
	e.headers(s, &s.resp, headers, len(lr.Data) == 0)
	if len(lr.Data) > 0 && !s.resp.paused {
		e.body(s, &s.resp, lr.Data, true)
	} else if len(lr.Data) > 0 {
		s.resp.held, s.resp.heldEOS, s.resp.heldData = clone(lr.Data), true, true
	}
	s.action = types.ActionPause
}

// GetCurrentHttpStreamAction returns the stream's last action: what its
// last callback returned, Continue after the filter resumed it, Pause
// after a local reply.
func (e *Emulator) GetCurrentHttpStreamAction(id uint32) types.Action {
	e.nv.Lock()
	defer e.nv.Unlock()
	if s := e.h.streams[id]; s != nil {
		return s.action
	}
	return types.ActionContinue
}

// GetCurrentRequestHeaders returns the request headers as the filter left
// them.
func (e *Emulator) GetCurrentRequestHeaders(id uint32) [][2]string {
	return e.read(id, func(s *stream) [][2]string { return clonePairs(s.req.headers) })
}

// GetCurrentRequestTrailers returns the request trailers.
func (e *Emulator) GetCurrentRequestTrailers(id uint32) [][2]string {
	return e.read(id, func(s *stream) [][2]string { return clonePairs(s.req.trailers) })
}

// GetCurrentResponseHeaders returns the response headers as the filter
// left them (for a local reply: what the client receives).
func (e *Emulator) GetCurrentResponseHeaders(id uint32) [][2]string {
	return e.read(id, func(s *stream) [][2]string { return clonePairs(s.resp.headers) })
}

// GetCurrentResponseTrailers returns the response trailers.
func (e *Emulator) GetCurrentResponseTrailers(id uint32) [][2]string {
	return e.read(id, func(s *stream) [][2]string { return clonePairs(s.resp.trailers) })
}

// GetCurrentRequestBody returns the request body as the upstream gets it:
// what was passed on, followed by what is still buffered.
func (e *Emulator) GetCurrentRequestBody(id uint32) []byte {
	return e.wholeBody(id, func(s *stream) *flow { return &s.req })
}

// GetCurrentResponseBody returns the response body as the client gets it.
func (e *Emulator) GetCurrentResponseBody(id uint32) []byte {
	return e.wholeBody(id, func(s *stream) *flow { return &s.resp })
}

// wholeBody is what was passed on of a flow's body, followed by what is
// still buffered.
func (e *Emulator) wholeBody(id uint32, which func(*stream) *flow) []byte {
	e.nv.Lock()
	defer e.nv.Unlock()
	if s := e.h.streams[id]; s != nil {
		f := which(s)
		return append(clone(f.forwarded), f.body...)
	}
	return nil
}

// GetSentLocalResponse returns the local reply the filter sent on the
// stream, or nil.
func (e *Emulator) GetSentLocalResponse(id uint32) *LocalHttpResponse {
	e.nv.Lock()
	defer e.nv.Unlock()
	if s := e.h.streams[id]; s != nil && s.local != nil {
		lr := *s.local
		return &lr
	}
	return nil
}

// IsHttpStreamReset reports whether the filter reset the stream with
// proxy_close_stream (the host then ends it: the stream is completed).
func (e *Emulator) IsHttpStreamReset(id uint32) bool {
	e.nv.Lock()
	defer e.nv.Unlock()
	return e.h.resets[id]
}

func (e *Emulator) read(id uint32, f func(*stream) [][2]string) [][2]string {
	e.nv.Lock()
	defer e.nv.Unlock()
	if s := e.h.streams[id]; s != nil {
		return f(s)
	}
	return nil
}

// RouteCacheClears is how many times the stream called the foreign
// function clear_route_cache.
func (e *Emulator) RouteCacheClears(id uint32) int {
	e.nv.Lock()
	defer e.nv.Unlock()
	if s := e.h.streams[id]; s != nil {
		return s.routeClears
	}
	return 0
}
