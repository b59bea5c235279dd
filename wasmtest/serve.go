package wasmtest

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
)

// ServeHTTP proxies r through the filter to the upstream, as Envoy would:
// the request goes to one worker VM, its body reaches the filter chunk by
// chunk as it arrives and the upstream only as the filter lets it, and the
// response streams back the same way. A stream the filter or the upstream
// resets drops the client's connection. A body the stream left unread (a
// local reply at the request headers) is read to its end before ServeHTTP
// returns, so the connection serves the client's next request; one larger
// than 256 KiB, or that stops arriving, closes it instead (clientbody.go).
func (h *Host) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body *clientBody
	if hasBody(r) {
		r, body = withClientBody(r)
	}
	res := h.serve(w, r, -1)
	if body != nil {
		body.finish(w, res)
	}
	if res.reset {
		// Also when the client went away: one that only half-closed its
		// side (shutdown(SHUT_WR) after sending, as nc and some HTTP/1.0
		// tools do) is still reading, and returning normally would hand it
		// net/http's default empty 200 for a request that never finished.
		panic(http.ErrAbortHandler)
	}
}

// hasBody reports whether r has a body to read; the host reads such a body
// in full-duplex mode.
func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

type serveResult struct {
	reset, clientGone bool
	upstream          bool
	counts            Counts
}

// serve runs one stream on the driver goroutine, on worker pick (1-based),
// the next in turn (0) or the least busy (-1, the proxy's way).
func (h *Host) serve(w http.ResponseWriter, r *http.Request, pick int) serveResult {
	if !h.enter() {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "the proxy is shutting down")
		return serveResult{}
	}
	defer h.leave()
	if why := h.reqLimits.requestOver(r); why != "" {
		// Envoy's codec refuses the request before any filter runs, and
		// closes the connection.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusRequestHeaderFieldsTooLarge)
		io.WriteString(w, "request header fields too large: "+why+"\n")
		return serveResult{}
	}
	if hasBody(r) {
		// Read the rest of the request while the response streams back.
		http.NewResponseController(w).EnableFullDuplex()
	}
	var v *vm
	if pick < 0 {
		wk := h.leastBusy()
		wk.busy.Add(1)
		defer wk.busy.Add(-1)
		v = h.workerVM(wk)
	} else {
		v = h.pickVM(pick)
	}
	s := &stream{h: h, v: v}
	s.req.resp = false
	s.resp.resp = true
	px := &s.px
	px.w, px.r = w, r
	px.done = make(chan struct{})
	px.wake = make(chan struct{}, 1)
	px.reqCh = make(chan reqEvent, 1)
	px.reqMore = make(chan struct{}, 1)
	px.upCh = make(chan upEvent, 1)
	px.upMore = make(chan struct{}, 1)
	px.promise = -1
	hdr, eos := s.requestMap(r)

	v.mu.Lock()
	s.begin(hdr, eos)
	s.settle()
	v.afterCall(s)
	v.mu.Unlock()
	s.flush()
	s.armIdle()
	s.armRequest()
	defer s.stopTimers()

	clientDone := r.Context().Done()
	for !px.ending && !px.clientEnded {
		if s.askForData() {
			// A body that is already in memory (Do) is read on this
			// goroutine: each chunk still reaches the filter on its own.
			ev := px.reqBody.next()
			px.reqPending = false
			s.locked(func() { s.onRequestEvent(reqEvent{data: ev.data, eos: ev.eos, trl: ev.trl, err: ev.err}) })
			continue
		}
		select {
		case ev := <-px.reqCh:
			px.reqPending = false
			s.armIdle()
			s.locked(func() { s.onRequestEvent(ev) })
		case ev := <-px.upCh:
			px.respPending = false
			s.armIdle()
			s.locked(func() { s.onUpstreamEvent(ev) })
		case <-px.wake:
			s.locked(s.checkTimers)
		case <-clientDone:
			px.ending, px.reset, px.clientGone = true, true, true
		case <-h.closing:
			px.ending, px.reset = true, true
		}
	}

	v.mu.Lock()
	if px.ending {
		s.cancelUpstream()
		if px.clientGone && s.details == "" {
			s.details = "downstream_remote_disconnect"
		}
	}
	s.finish()
	v.afterCall(s)
	v.mu.Unlock()
	close(px.done)
	if px.upCancel != nil && (px.ending || !px.clientEnded) {
		px.upCancel()
	}
	if px.upBody != nil {
		px.upBody.fail(errStreamCancelled)
	}
	return serveResult{reset: px.reset, clientGone: px.clientGone, upstream: px.upSent, counts: s.counts}
}

// locked runs f and the deferred actions with the VM locked, then performs
// the effects.
func (s *stream) locked(f func()) {
	v := s.v
	v.mu.Lock()
	if !s.px.ending {
		f()
		s.settle()
	}
	v.afterCall(s)
	v.mu.Unlock()
	s.flush()
}

// askForData lets the readers deliver their next chunk when the filter can
// take it: not past the buffer limit while it holds data, and not while the
// upstream has not drained what it was given.
func (s *stream) askForData() (syncRead bool) {
	px := &s.px
	d := &s.req
	if !px.reqPending && !d.gotEOS && px.r.Body != nil && px.r.Body != http.NoBody {
		want := false
		switch d.state {
		case dsIterating, dsBuffer:
			want = true
		case dsStopAll:
			want = len(d.body) < s.h.bufferLimit
		}
		if want && px.upBody != nil && px.upBody.full(s.h.bufferLimit) {
			want = false
		}
		if want {
			if px.reqBody == nil {
				px.reqBody = newBodyReader(px.r.Body, px.r.ContentLength, px.r.Trailer)
				if _, ok := px.r.Body.(*chunkReader); ok {
					px.reqSync = true
				} else {
					go s.readRequest()
				}
			}
			px.reqPending = true
			if px.reqSync {
				return true
			}
			px.reqMore <- struct{}{}
		}
	}
	d = &s.resp
	if !px.respPending && px.respReading && !d.gotEOS {
		want := false
		switch d.state {
		case dsIterating, dsBuffer:
			want = true
		case dsStopAll:
			want = len(d.body) < s.h.bufferLimit
		}
		if want {
			px.respPending = true
			px.upMore <- struct{}{}
		}
	}
	return false
}

func (s *stream) readRequest() {
	s.px.reqBody.pump(s.px.reqMore, s.px.done, func(ev bodyEvent) bool {
		select {
		case s.px.reqCh <- reqEvent{data: ev.data, eos: ev.eos, trl: ev.trl, err: ev.err}:
			return true
		case <-s.px.done:
			return false
		}
	})
}

// onRequestEvent feeds the client's body into the filter (VM locked).
func (s *stream) onRequestEvent(ev reqEvent) {
	d := &s.req
	if d.state == dsDone || d.gotEOS {
		return
	}
	switch {
	case ev.err != nil:
		s.details = "downstream_remote_disconnect"
		s.resetStream()
		s.px.clientGone = s.px.r.Context().Err() != nil
	case ev.trl != nil:
		s.trailers(d, ev.trl)
	default:
		s.data(d, ev.data, ev.eos)
	}
}

// onUpstreamEvent feeds the upstream's response into the filter (VM locked).
func (s *stream) onUpstreamEvent(ev upEvent) {
	px := &s.px
	if ev.gen != px.upGen || px.upBlocked {
		return
	}
	if px.r.Context().Err() != nil {
		// The client is gone: whatever the upstream says is moot.
		px.ending, px.reset, px.clientGone = true, true, true
		s.cancelUpstream()
		return
	}
	d := &s.resp
	switch {
	case ev.status != 0:
		if s.respBegun {
			return
		}
		if why := s.h.respLimits.mapOver(ev.hdr); why != "" {
			// Envoy's upstream codec refuses the headers: a protocol
			// error before the response started, 502 to the client.
			s.h.logs.add(s.v.index, s.v.name, LogWarn, "upstream response headers refused: "+why)
			s.cancelUpstream()
			s.localReply(&localReply{
				status:  502,
				body:    []byte("upstream connect error or disconnect/reset before headers. reset reason: protocol error"),
				details: "upstream_reset_before_response_started{protocol_error}",
			})
			return
		}
		s.respBegun = true
		s.details = "via_upstream"
		eos := ev.headersEOS || s.method == http.MethodHead
		px.respReading = !eos && !(ev.data != nil && ev.eos)
		px.respTrlDecl = ev.trlDecl
		d.hdr = ev.hdr
		d.headersEOS = eos
		if eos {
			d.gotEOS = true
		}
		s.headers(d, eos)
		if ev.data != nil && !eos && !px.ending {
			s.data(d, ev.data, ev.eos)
		}
	case ev.err != nil:
		s.upstreamError(ev.err)
	case ev.trl != nil:
		s.trailers(d, ev.trl)
	default:
		s.data(d, ev.data, ev.eos)
	}
}

// requestMap is the request header map the filter sees: Envoy's
// pseudo-headers, then the client's headers with lower-case names; an
// x-request-id is added when the client sent none, as Envoy does.
func (s *stream) requestMap(r *http.Request) (hmap, bool) {
	path := r.RequestURI
	if path == "" || path[0] != '/' && path != "*" {
		path = r.URL.RequestURI()
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	m := make(hmap, 0, len(r.Header)+6)
	m = append(m, hpair{":authority", r.Host}, hpair{":path", path}, hpair{":method", r.Method}, hpair{":scheme", scheme})
	m = appendHeader(m, r.Header)
	if r.ContentLength > 0 {
		if _, ok := m.get("content-length"); !ok {
			m = append(m, hpair{"content-length", strconv.FormatInt(r.ContentLength, 10)})
		}
	}
	id, ok := m.get("x-request-id")
	if !ok {
		id = newRequestID()
		m = append(m, hpair{"x-request-id", id})
	}
	s.method = r.Method
	s.proto = r.Proto
	s.start = s.h.clock.Now()
	s.remoteAddr = r.RemoteAddr
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(interface{ String() string }); ok {
		s.localAddr = a.String()
	}
	s.reqHeaderBytes = m.byteSize()
	eos := r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody
	return m, eos
}

// newRequestID is a random UUID v4, Envoy's x-request-id.
func newRequestID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}

// finish ends the stream's life in the VM: proxy_on_log, then proxy_on_done,
// then proxy_on_delete (Envoy's order, shared/proxy-wasm.md 3.3).
func (s *stream) finish() {
	if s.ended {
		return
	}
	s.ended = true
	v := s.v
	if s.created && !v.failed.Load() {
		s.inLog = true
		v.enterStream(s)
		v.call(v.fn.log, "proxy_on_log", uint64(s.id))
		s.inLog = false
		if !v.failed.Load() {
			v.enterStream(s)
			v.callDefault(v.fn.done, 1, "proxy_on_done", uint64(s.id))
		}
		if !v.failed.Load() {
			v.enterStream(s)
			v.call(v.fn.delete, "proxy_on_delete", uint64(s.id))
		}
	}
	if s.created {
		delete(v.streams, s.id)
	}
	s.actions = nil
	v.total.Streams++
	v.enterRoot()
}
