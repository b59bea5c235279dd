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

	reqHeaders, reqTrailers   [][2]string
	respHeaders, respTrailers [][2]string
	reqHeadersLive            bool
	reqTrailersLive           bool
	respHeadersLive           bool
	respTrailersLive          bool

	reqBody, respBody             []byte // buffered, not yet passed on
	reqForwarded, respForwarded   []byte // passed on upstream / downstream
	reqBodyLive, respBodyLive     bool
	reqBuffering, respBuffering   bool
	reqEOS, respEOS               bool
	inReqBody, inRespBody         bool
	reqPaused, respPaused         bool // a headers callback returned Pause
	heldReq, heldResp             []byte
	heldReqEOS, heldRespEOS       bool
	heldReqData, heldRespData     bool
	heldReqTrailers, heldRespTrls [][2]string
	respStarted                   bool
	inLog                         bool

	action types.Action

	pendingLocal *LocalHttpResponse
	local        *LocalHttpResponse
	continueReq  bool
	continueResp bool
	pendingReset bool
	routeClears  int // clear_route_cache calls
	reset        bool
	touched      bool
	finished     bool

	props map[string][]byte
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
	e.nv.Enter()
	defer e.nv.Exit()
	s, ok := e.enterStream(id)
	if !ok || s.local != nil {
		return types.ActionPause
	}
	s.reqHeaders = lowerPairs(headers)
	s.reqHeadersLive = true
	s.reqEOS = endOfStream
	act := e.run(s, func() uint32 {
		return e.guest().OnRequestHeaders(id, uint32(len(headers)), endOfStream)
	})
	if act == types.ActionContinue {
		s.reqHeadersLive = false
	} else {
		s.reqPaused = true
	}
	e.afterCall()
	return s.action
}

// CallOnRequestBody delivers a request body chunk. After a Pause from the
// body callback the host buffers, so the next call's bodySize is the whole
// buffered body. While the request headers are paused, data is held and
// delivered when the filter resumes the request.
func (e *Emulator) CallOnRequestBody(id uint32, body []byte, endOfStream bool) types.Action {
	e.nv.Enter()
	defer e.nv.Exit()
	s, ok := e.enterStream(id)
	if !ok || s.local != nil {
		return types.ActionPause
	}
	if s.reqPaused {
		s.heldReq = append(s.heldReq, body...)
		s.heldReqEOS = endOfStream
		s.heldReqData = true
		return types.ActionPause
	}
	e.requestBody(s, body, endOfStream)
	e.afterCall()
	return s.action
}

func (e *Emulator) requestBody(s *stream, body []byte, eos bool) {
	if s.reqBuffering {
		s.reqBody = append(s.reqBody, body...)
	} else {
		s.reqBody = clone(body)
		if s.reqBody == nil {
			s.reqBody = []byte{}
		}
	}
	s.reqBodyLive = true
	s.reqEOS = eos
	s.inReqBody = true
	act := e.run(s, func() uint32 {
		return e.guest().OnRequestBody(s.id, uint32(len(s.reqBody)), eos)
	})
	s.inReqBody = false
	s.reqBuffering = false
	if act == types.ActionContinue {
		s.reqForwarded = append(s.reqForwarded, s.reqBody...)
		s.reqBody = nil
		s.reqBodyLive = false
	} else {
		s.reqBuffering = true
	}
}

// CallOnRequestTrailers delivers request trailers.
func (e *Emulator) CallOnRequestTrailers(id uint32, trailers [][2]string) types.Action {
	e.nv.Enter()
	defer e.nv.Exit()
	s, ok := e.enterStream(id)
	if !ok || s.local != nil {
		return types.ActionPause
	}
	if s.reqPaused {
		s.heldReqTrailers = lowerPairs(trailers)
		if s.heldReqTrailers == nil {
			s.heldReqTrailers = [][2]string{}
		}
		return types.ActionPause
	}
	e.requestTrailers(s, lowerPairs(trailers))
	e.afterCall()
	return s.action
}

func (e *Emulator) requestTrailers(s *stream, trailers [][2]string) {
	s.reqTrailers = trailers
	s.reqTrailersLive = true
	act := e.run(s, func() uint32 { return e.guest().OnRequestTrailers(s.id, uint32(len(trailers))) })
	if act == types.ActionContinue {
		s.reqTrailersLive = false
	}
}

// CallOnResponseHeaders delivers the upstream's response headers.
func (e *Emulator) CallOnResponseHeaders(id uint32, headers [][2]string, endOfStream bool) types.Action {
	e.nv.Enter()
	defer e.nv.Exit()
	s, ok := e.enterStream(id)
	if !ok || s.local != nil {
		return types.ActionPause
	}
	e.responseHeaders(s, lowerPairs(headers), endOfStream)
	e.afterCall()
	return s.action
}

func (e *Emulator) responseHeaders(s *stream, headers [][2]string, eos bool) {
	s.respStarted = true
	s.respHeaders = headers
	s.respHeadersLive = true
	s.respEOS = eos
	act := e.run(s, func() uint32 {
		return e.guest().OnResponseHeaders(s.id, uint32(len(headers)), eos)
	})
	if act == types.ActionContinue {
		s.respHeadersLive = false
	} else {
		s.respPaused = true
	}
}

// CallOnResponseBody delivers a response body chunk, with the same
// buffering as CallOnRequestBody.
func (e *Emulator) CallOnResponseBody(id uint32, body []byte, endOfStream bool) types.Action {
	e.nv.Enter()
	defer e.nv.Exit()
	s, ok := e.enterStream(id)
	if !ok || s.local != nil {
		return types.ActionPause
	}
	if s.respPaused {
		s.heldResp = append(s.heldResp, body...)
		s.heldRespEOS = endOfStream
		s.heldRespData = true
		return types.ActionPause
	}
	e.responseBody(s, body, endOfStream)
	e.afterCall()
	return s.action
}

func (e *Emulator) responseBody(s *stream, body []byte, eos bool) {
	if s.respBuffering {
		s.respBody = append(s.respBody, body...)
	} else {
		s.respBody = clone(body)
		if s.respBody == nil {
			s.respBody = []byte{}
		}
	}
	s.respBodyLive = true
	s.respEOS = eos
	s.inRespBody = true
	act := e.run(s, func() uint32 {
		return e.guest().OnResponseBody(s.id, uint32(len(s.respBody)), eos)
	})
	s.inRespBody = false
	s.respBuffering = false
	if act == types.ActionContinue {
		s.respForwarded = append(s.respForwarded, s.respBody...)
		s.respBody = nil
		s.respBodyLive = false
	} else {
		s.respBuffering = true
	}
}

// CallOnResponseTrailers delivers response trailers.
func (e *Emulator) CallOnResponseTrailers(id uint32, trailers [][2]string) types.Action {
	e.nv.Enter()
	defer e.nv.Exit()
	s, ok := e.enterStream(id)
	if !ok || s.local != nil {
		return types.ActionPause
	}
	if s.respPaused {
		s.heldRespTrls = lowerPairs(trailers)
		if s.heldRespTrls == nil {
			s.heldRespTrls = [][2]string{}
		}
		return types.ActionPause
	}
	e.responseTrailers(s, lowerPairs(trailers))
	e.afterCall()
	return s.action
}

func (e *Emulator) responseTrailers(s *stream, trailers [][2]string) {
	s.respTrailers = trailers
	s.respTrailersLive = true
	act := e.run(s, func() uint32 { return e.guest().OnResponseTrailers(s.id, uint32(len(trailers))) })
	if act == types.ActionContinue {
		s.respTrailersLive = false
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

// resumeRequest applies a deferred proxy_continue_stream(REQUEST): the
// buffered body goes upstream, and data held behind paused headers is
// delivered to the filter now.
func (e *Emulator) resumeRequest(s *stream) {
	s.action = types.ActionContinue
	s.reqForwarded = append(s.reqForwarded, s.reqBody...)
	s.reqBody = nil
	s.reqBuffering = false
	if !s.reqPaused {
		return
	}
	s.reqPaused = false
	if s.heldReqData {
		body, eos := s.heldReq, s.heldReqEOS
		s.heldReq, s.heldReqData = nil, false
		e.requestBody(s, body, eos)
	}
	if t := s.heldReqTrailers; t != nil && !s.reqBuffering && s.local == nil && s.pendingLocal == nil {
		s.heldReqTrailers = nil
		e.requestTrailers(s, t)
	}
}

// resumeResponse is resumeRequest for the response.
func (e *Emulator) resumeResponse(s *stream) {
	s.action = types.ActionContinue
	s.respForwarded = append(s.respForwarded, s.respBody...)
	s.respBody = nil
	s.respBuffering = false
	if !s.respPaused {
		return
	}
	s.respPaused = false
	if s.heldRespData {
		body, eos := s.heldResp, s.heldRespEOS
		s.heldResp, s.heldRespData = nil, false
		e.responseBody(s, body, eos)
	}
	if t := s.heldRespTrls; t != nil && !s.respBuffering && s.local == nil && s.pendingLocal == nil {
		s.heldRespTrls = nil
		e.responseTrailers(s, t)
	}
}

// sendLocal delivers a local reply: the stream stops, and if the response
// has not reached this filter yet, the reply's headers and body run
// through its OnHttpResponseHeaders and OnHttpResponseBody (Envoy issue
// #11447).
func (e *Emulator) sendLocal(s *stream, lr *LocalHttpResponse) {
	s.local = lr
	s.action = types.ActionPause
	s.reqBodyLive, s.reqHeadersLive, s.reqTrailersLive = false, false, false
	s.reqPaused, s.heldReqData, s.heldReqTrailers = false, false, nil
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
		s.respHeaders = headers
		s.respForwarded = clone(lr.Data)
		return
	}
	s.respPaused, s.respBuffering = false, false
	s.respBody, s.respForwarded = nil, nil
	e.responseHeaders(s, headers, len(lr.Data) == 0)
	if len(lr.Data) > 0 && !s.respPaused {
		e.responseBody(s, lr.Data, true)
	} else if len(lr.Data) > 0 {
		s.heldResp, s.heldRespEOS, s.heldRespData = clone(lr.Data), true, true
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
	return e.read(id, func(s *stream) [][2]string { return clonePairs(s.reqHeaders) })
}

// GetCurrentRequestTrailers returns the request trailers.
func (e *Emulator) GetCurrentRequestTrailers(id uint32) [][2]string {
	return e.read(id, func(s *stream) [][2]string { return clonePairs(s.reqTrailers) })
}

// GetCurrentResponseHeaders returns the response headers as the filter
// left them (for a local reply: what the client receives).
func (e *Emulator) GetCurrentResponseHeaders(id uint32) [][2]string {
	return e.read(id, func(s *stream) [][2]string { return clonePairs(s.respHeaders) })
}

// GetCurrentResponseTrailers returns the response trailers.
func (e *Emulator) GetCurrentResponseTrailers(id uint32) [][2]string {
	return e.read(id, func(s *stream) [][2]string { return clonePairs(s.respTrailers) })
}

// GetCurrentRequestBody returns the request body as the upstream gets it:
// what was passed on, followed by what is still buffered.
func (e *Emulator) GetCurrentRequestBody(id uint32) []byte {
	e.nv.Lock()
	defer e.nv.Unlock()
	if s := e.h.streams[id]; s != nil {
		return append(clone(s.reqForwarded), s.reqBody...)
	}
	return nil
}

// GetCurrentResponseBody returns the response body as the client gets it.
func (e *Emulator) GetCurrentResponseBody(id uint32) []byte {
	e.nv.Lock()
	defer e.nv.Unlock()
	if s := e.h.streams[id]; s != nil {
		return append(clone(s.respForwarded), s.respBody...)
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
