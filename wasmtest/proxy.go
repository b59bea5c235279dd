package wasmtest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// The proxy side of a stream: the driver goroutine (ServeHTTP's), a reader
// of the client's body, and the upstream exchange. Filter state changes
// under the VM lock; every byte of I/O happens outside it, in the order the
// filter released things (effects).

type effectKind uint8

const (
	fxUpHeaders effectKind = iota
	fxUpData
	fxUpEnd
	fxClientHeaders
	fxClientData
	fxClientEnd
	fxClientDirect
)

type effect struct {
	kind  effectKind
	data  []byte
	reply *localReply
}

type reqEvent struct {
	data []byte
	eos  bool
	trl  hmap
	err  error
}

// upEvent is what the upstream side tells the driver: the response headers
// (status > 0, possibly with the whole body attached), a body chunk,
// trailers, or an error.
type upEvent struct {
	gen        int
	status     int
	hdr        hmap
	headersEOS bool // the response has no body
	trlDecl    bool // trailers were declared
	data       []byte
	eos        bool
	trl        hmap
	err        error
}

type proxyState struct {
	timers  streamTimers
	w       http.ResponseWriter
	r       *http.Request
	done    chan struct{}
	wake    chan struct{}
	reqCh   chan reqEvent
	reqMore chan struct{}
	upCh    chan upEvent
	upMore  chan struct{}
	fx      []effect
	spare   []effect

	// request → upstream
	reqBody     *bodyReader // the client's body, read by a goroutine or in line (reqSync)
	reqSync     bool
	reqPending  bool // a chunk was asked for and not yet received
	upHeaders   bool // request headers released, upstream not yet started
	upStarted   bool
	upSent      bool // the exchange began
	upBlocked   bool // cancelled: never start or listen again
	upGen       int
	upCancel    context.CancelFunc
	upBody      *bodyQueue
	respPending bool
	respReading bool // the upstream response has a body to read
	respTrlDecl bool // the upstream declared trailers

	// client
	commitWait  bool // response headers released, not yet written
	committed   bool
	promise     int64
	written     int64
	clientEnded bool
	ending      bool // stop: reset, client gone or host closing
	reset       bool
	clientGone  bool
}

func (s *stream) notify() {
	select {
	case s.px.wake <- struct{}{}:
	default:
	}
}

// The release functions record what the filter let through; flush carries
// it out. They run with the VM locked.

func (s *stream) releaseHeaders(d *direction) {
	if d.resp {
		s.px.fx = append(s.px.fx, effect{kind: fxClientHeaders})
		return
	}
	s.px.fx = append(s.px.fx, effect{kind: fxUpHeaders})
}

func (s *stream) releaseBody(d *direction) {
	if len(d.body) == 0 {
		d.body = nil
		return
	}
	k := fxUpData
	if d.resp {
		k = fxClientData
	}
	s.px.fx = append(s.px.fx, effect{kind: k, data: d.body})
	d.body = nil
}

func (s *stream) releaseEnd(d *direction) {
	if d.resp {
		s.px.fx = append(s.px.fx, effect{kind: fxClientEnd})
		return
	}
	s.px.fx = append(s.px.fx, effect{kind: fxUpEnd})
}

// cancelUpstream abandons the upstream exchange, started or not.
func (s *stream) cancelUpstream() {
	s.px.upBlocked = true
	s.px.upGen++
	s.px.upHeaders = false
	if s.px.upCancel != nil {
		s.px.upCancel()
	}
	if s.px.upBody != nil {
		s.px.upBody.fail(errStreamCancelled)
	}
	j := 0
	for _, e := range s.px.fx {
		if e.kind <= fxUpEnd {
			continue
		}
		s.px.fx[j] = e
		j++
	}
	s.px.fx = s.px.fx[:j]
}

var (
	errStreamCancelled = errors.New("wasmtest: stream cancelled")
	errLengthChanged   = errors.New("wasmtest: the request body no longer matches the content-length sent upstream")
)

// resetStream ends the stream abruptly: the client sees its connection
// dropped (or Response.Reset from Do).
func (s *stream) resetStream() {
	s.cancelUpstream()
	s.px.ending = true
	s.px.reset = true
	s.px.fx = s.px.fx[:0]
	s.req.state, s.resp.state = dsDone, dsDone
}

// directReply replaces a response that has begun but not reached the client.
func (s *stream) directReply(lr *localReply) {
	j := 0
	for _, e := range s.px.fx {
		if e.kind >= fxClientHeaders {
			continue
		}
		s.px.fx[j] = e
		j++
	}
	s.px.fx = s.px.fx[:j]
	if s.px.committed {
		s.resetStream()
		return
	}
	s.px.commitWait = false
	s.resp.state = dsDone
	s.resp.hdrOK, s.resp.bodyOK, s.resp.trlOK = false, false, false
	s.px.fx = append(s.px.fx, effect{kind: fxClientDirect, reply: lr})
}

// flush performs the recorded effects, in order, outside the VM lock. An
// effect may record more (an upstream that cannot be reached becomes a
// local reply); they are performed in turn.
func (s *stream) flush() {
	px := &s.px
	for !px.ending {
		if len(px.fx) == 0 {
			if !s.flushTail() {
				return
			}
			continue
		}
		fx := px.fx
		px.fx = px.spare[:0]
		for i := 0; i < len(fx) && !px.ending; i++ {
			e := &fx[i]
			switch e.kind {
			case fxUpHeaders:
				// Envoy's router opens the upstream request as soon as
				// the headers pass the filter; the body follows.
				px.upHeaders = true
				s.startUpstream()
			case fxUpData:
				if px.upBody != nil {
					px.upBody.push(e.data)
				}
			case fxUpEnd:
				if px.upBody != nil {
					px.upBody.end(s.req.trl)
				}
			case fxClientHeaders:
				px.commitWait = true
			case fxClientData:
				s.commit(fx[i:])
				s.write(e.data, !hasEnd(fx[i:], fxClientEnd))
			case fxClientEnd:
				s.commit(fx[i:])
				s.endClient()
			case fxClientDirect:
				s.writeDirect(e.reply)
			}
		}
		clear(fx)
		px.spare = fx[:0]
	}
}

// flushTail starts what must not wait for more effects: a response of
// unknown length reaches the client as soon as its headers are released, so
// streams show up at once. It reports whether it recorded new effects.
func (s *stream) flushTail() bool {
	px := &s.px
	if px.commitWait && !px.committed && !px.ending {
		if _, ok := s.resp.hdr.get("content-length"); !ok || s.noBody() {
			s.commit(nil)
			s.flushClient()
		}
	}
	return len(px.fx) > 0
}

func hasEnd(fx []effect, k effectKind) bool {
	for i := range fx {
		if fx[i].kind == k {
			return true
		}
	}
	return false
}

// batchLen sums the data effects of kind k before the end effect, and says
// whether the end is among them.
func batchLen(fx []effect, data, end effectKind) (int64, bool) {
	var n int64
	for i := range fx {
		switch fx[i].kind {
		case data:
			n += int64(len(fx[i].data))
		case end:
			return n, true
		}
	}
	return n, false
}

func (s *stream) reqChunked() bool {
	return s.px.r.ContentLength < 0 || len(s.px.r.Trailer) > 0
}

// startUpstream sends the request headers upstream, once, as they leave the
// filter: with the content-length the filter left in them (none when it
// removed it, or when trailers follow: the body then goes chunked), and no
// body when the request ended with its headers.
func (s *stream) startUpstream() {
	px := &s.px
	if px.upStarted || px.upBlocked || !px.upHeaders {
		return
	}
	px.upStarted = true
	t := s.upstreamTarget()
	if t == nil {
		px.upBlocked = true
		s.noRoute()
		return
	}
	cl := int64(-1)
	switch {
	case s.req.headersEOS:
		cl = 0
	case s.req.hasTrl || len(px.r.Trailer) > 0:
	default:
		if v, ok := s.req.hdr.get("content-length"); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
				cl = n
			}
		}
	}
	var body io.ReadCloser = http.NoBody
	if cl != 0 {
		px.upBody = newBodyQueue(s, cl)
		body = px.upBody
	}
	ctx, cancel := context.WithCancel(px.r.Context())
	px.upCancel = cancel
	req, err := t.request(ctx, s.req.hdr, body, cl)
	if err != nil {
		cancel()
		s.h.logs.add(s.v.index, s.v.name, LogError, "upstream request: "+err.Error())
		px.upBlocked = true
		s.upstreamFailed(err)
		return
	}
	if len(px.r.Trailer) > 0 || s.req.hasTrl {
		req.Trailer = http.Header{}
		for k := range px.r.Trailer {
			req.Trailer[k] = nil
		}
		if px.upBody != nil {
			px.upBody.trailer = req.Trailer
		}
	}
	gen := px.upGen
	px.upSent = true
	go s.runUpstream(t, req, gen)
}

// upstreamFailed turns an upstream failure before the response into a 503
// local reply, which runs this filter's response callbacks (as Envoy's router).
func (s *stream) upstreamFailed(err error) {
	v := s.v
	v.mu.Lock()
	if !s.px.ending {
		s.upstreamError(err)
		s.settle()
	}
	v.afterCall(s)
	v.mu.Unlock()
}

// noRoute answers a request the filter let through when the host has no
// upstream: Envoy's 404 for a route table without a match.
func (s *stream) noRoute() {
	v := s.v
	v.mu.Lock()
	if !s.px.ending {
		s.localReply(&localReply{status: 404, details: "route_not_found"})
		s.settle()
	}
	v.afterCall(s)
	v.mu.Unlock()
}

func (s *stream) upstreamError(err error) {
	if s.px.ending {
		return
	}
	if s.respBegun {
		s.details = "upstream_reset_after_response_started"
		s.resetStream()
		return
	}
	s.h.logs.add(s.v.index, s.v.name, LogDebug, "upstream: "+err.Error())
	s.localReply(&localReply{
		status:  503,
		body:    []byte("upstream connect error or disconnect/reset before headers. reset reason: connection failure"),
		details: "upstream_reset_before_response_started{connection_failure}",
	})
}

// runUpstream performs the exchange and feeds the response to the driver.
func (s *stream) runUpstream(t *target, req *http.Request, gen int) {
	if t.handler != nil {
		s.runHandler(t.handler, req, gen)
		return
	}
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		s.sendUp(upEvent{gen: gen, err: err})
		return
	}
	eos := resp.Body == http.NoBody
	hdr := make(hmap, 0, len(resp.Header)+1)
	hdr = append(hdr, hpair{":status", strconv.Itoa(resp.StatusCode)})
	hdr = appendHeader(hdr, resp.Header)
	if !s.sendUp(upEvent{gen: gen, status: resp.StatusCode, hdr: hdr, headersEOS: eos, trlDecl: len(resp.Trailer) > 0}) || eos {
		resp.Body.Close()
		return
	}
	defer resp.Body.Close()
	br := newBodyReader(resp.Body, resp.ContentLength, resp.Trailer)
	br.pump(s.px.upMore, s.px.done, func(ev bodyEvent) bool {
		return s.sendUp(upEvent{gen: gen, data: ev.data, eos: ev.eos, trl: ev.trl, err: ev.err})
	})
}

func (s *stream) sendUp(ev upEvent) bool {
	select {
	case s.px.upCh <- ev:
		return true
	case <-s.px.done:
		return false
	}
}

// commit writes the response headers to the client, with an exact
// Content-Length when the whole body is known by now, the upstream's when
// the filter has not touched the body, and none otherwise.
func (s *stream) commit(rest []effect) {
	px := &s.px
	if px.committed {
		return
	}
	px.committed = true
	px.commitWait = false
	hdr := s.resp.hdr
	status := 502
	if v, ok := hdr.get(":status"); ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 100 && n <= 999 {
			status = n
		}
	}
	h := px.w.Header()
	hdr.toHeader(h, "content-length")
	px.promise = -1
	if s.noBody() {
		if v, ok := hdr.get("content-length"); ok {
			h["Content-Length"] = []string{v}
		}
	} else {
		n, whole := batchLen(rest, fxClientData, fxClientEnd)
		cl := int64(-1)
		switch {
		case whole && !s.resp.hasTrl:
			cl = n
		case !s.resp.changed && !s.px.respTrlDecl:
			if v, ok := hdr.get("content-length"); ok {
				if x, err := strconv.ParseInt(v, 10, 64); err == nil && x >= 0 {
					cl = x
				}
			}
		}
		if cl >= 0 {
			h["Content-Length"] = []string{strconv.FormatInt(cl, 10)}
			px.promise = cl
		}
	}
	px.w.WriteHeader(status)
}

// noBody reports a response that carries no body by definition.
func (s *stream) noBody() bool {
	if s.method == http.MethodHead {
		return true
	}
	v, _ := s.resp.hdr.get(":status")
	return v == "204" || v == "304" || (len(v) == 3 && v[0] == '1')
}

func (s *stream) write(b []byte, flush bool) {
	px := &s.px
	if px.promise >= 0 && px.written+int64(len(b)) > px.promise {
		s.breakPromise(px.written + int64(len(b)))
		return
	}
	n, err := px.w.Write(b)
	px.written += int64(n)
	if err != nil {
		px.ending, px.reset, px.clientGone = true, true, true
		return
	}
	if flush {
		s.flushClient()
	}
}

func (s *stream) flushClient() {
	if f, ok := s.px.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *stream) endClient() {
	px := &s.px
	if px.promise >= 0 && px.written != px.promise {
		s.breakPromise(px.written)
		return
	}
	if s.resp.hasTrl {
		h := px.w.Header()
		for _, p := range s.resp.trl {
			if p.k == "" || p.k[0] == ':' {
				continue
			}
			k := http.TrailerPrefix + canonicalKey(p.k)
			h[k] = append(h[k], p.v)
		}
	}
	px.clientEnded = true
}

// breakPromise is a body whose length no longer matches the Content-Length
// already sent: the host can only drop the connection, and says why.
func (s *stream) breakPromise(n int64) {
	s.h.logs.add(s.v.index, s.v.name, LogError, "response body is "+strconv.FormatInt(n, 10)+
		" bytes but content-length "+strconv.FormatInt(s.px.promise, 10)+" was already sent; a filter that changes a streamed body must remove content-length in proxy_on_response_headers")
	s.px.ending, s.px.reset = true, true
}

// writeDirect writes a local reply that bypasses the filter.
func (s *stream) writeDirect(lr *localReply) {
	px := &s.px
	px.committed = true
	h := px.w.Header()
	lr.headers.toHeader(h, "content-length")
	if len(lr.body) > 0 {
		if h.Get("Content-Type") == "" {
			h["Content-Type"] = []string{"text/plain"}
		}
	}
	h["Content-Length"] = []string{strconv.Itoa(len(lr.body))}
	px.w.WriteHeader(lr.status)
	if len(lr.body) > 0 {
		n, err := px.w.Write(lr.body)
		px.written += int64(n)
		if err != nil {
			px.ending, px.reset, px.clientGone = true, true, true
			return
		}
	}
	px.clientEnded = true
}

// bodyQueue is the request body the upstream reads: chunks the filter
// released, then EOF with trailers. The driver never blocks on it.
type bodyQueue struct {
	s       *stream
	mu      sync.Mutex
	cond    sync.Cond
	chunks  [][]byte
	size    int
	ended   bool
	err     error
	trl     hmap
	trailer http.Header
	starved bool  // the driver waits for the queue to drain
	promise int64 // the Content-Length sent upstream, -1 none
	read    int64
}

func newBodyQueue(s *stream, promise int64) *bodyQueue {
	q := &bodyQueue{s: s, promise: promise}
	q.cond.L = &q.mu
	return q
}

func (q *bodyQueue) push(b []byte) {
	q.mu.Lock()
	q.chunks = append(q.chunks, b)
	q.size += len(b)
	q.mu.Unlock()
	q.cond.Signal()
}

func (q *bodyQueue) end(trl hmap) {
	q.mu.Lock()
	q.ended = true
	q.trl = trl
	q.mu.Unlock()
	q.cond.Signal()
}

func (q *bodyQueue) fail(err error) {
	q.mu.Lock()
	if q.err == nil {
		q.err = err
	}
	q.mu.Unlock()
	q.cond.Broadcast()
}

// full reports whether the driver should stop reading the client for now.
func (q *bodyQueue) full(limit int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.size >= limit {
		q.starved = true
		return true
	}
	return false
}

func (q *bodyQueue) Read(p []byte) (int, error) {
	q.mu.Lock()
	for len(q.chunks) == 0 && !q.ended && q.err == nil {
		q.cond.Wait()
	}
	if q.err != nil {
		err := q.err
		q.mu.Unlock()
		return 0, err
	}
	if q.promise >= 0 && (q.read == q.promise && len(q.chunks) > 0 || len(q.chunks) == 0 && q.read != q.promise) {
		// The filter changed a body whose length had already gone out.
		q.err = errLengthChanged
		q.mu.Unlock()
		q.s.h.logs.add(q.s.v.index, q.s.v.name, LogError, "request body changed length after content-length "+strconv.FormatInt(q.promise, 10)+
			" went upstream; a filter that changes a streamed request body must remove content-length in proxy_on_request_headers")
		return 0, errLengthChanged
	}
	if len(q.chunks) == 0 {
		if q.trailer != nil {
			for _, pr := range q.trl {
				if pr.k == "" || pr.k[0] == ':' {
					continue
				}
				k := canonicalKey(pr.k)
				q.trailer[k] = append(q.trailer[k], pr.v)
			}
		}
		q.mu.Unlock()
		return 0, io.EOF
	}
	if q.promise >= 0 && int64(len(p)) > q.promise-q.read {
		p = p[:q.promise-q.read]
	}
	n := copy(p, q.chunks[0])
	q.read += int64(n)
	q.chunks[0] = q.chunks[0][n:]
	if len(q.chunks[0]) == 0 {
		q.chunks[0] = nil
		q.chunks = q.chunks[1:]
	}
	q.size -= n
	wake := q.starved && q.size < q.s.h.bufferLimit/2
	if wake {
		q.starved = false
	}
	q.mu.Unlock()
	if wake {
		q.s.notify()
	}
	return n, nil
}

func (q *bodyQueue) Close() error {
	q.fail(errStreamCancelled)
	return nil
}
