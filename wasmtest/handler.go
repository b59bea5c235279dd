package wasmtest

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// In-process upstreams. The handler runs on the upstream goroutine and its
// writer talks to the stream's driver directly: the response headers go out
// at the first flush (or once 4 KiB are written, or when the handler
// returns, with the whole body attached and an exact length, as net/http's
// server would set it), later writes go out one by one when the driver asks
// for them, and trailers at the end.

// streamWriter is the ResponseWriter of a handler upstream.
type streamWriter struct {
	s        *stream
	gen      int
	req      *http.Request
	header   http.Header
	status   int
	buf      bytes.Buffer
	sent     bool
	declared bool
	dead     bool // the stream stopped listening
}

func (s *stream) runHandler(h http.Handler, req *http.Request, gen int) {
	serverSide(req)
	w := &streamWriter{s: s, gen: gen, req: req, header: http.Header{}}
	defer func() {
		if r := recover(); r != nil {
			w.send(upEvent{gen: gen, err: fmt.Errorf("wasmtest: upstream handler panicked: %v", r)})
		}
	}()
	h.ServeHTTP(w, req)
	if err := req.Context().Err(); err != nil && !w.sent {
		// Cancelled (the client went away, or a local reply): whatever the
		// handler made of it never left.
		w.send(upEvent{gen: gen, err: err})
		return
	}
	w.finish()
}

// serverSide turns a request the host built into what a handler gets from
// net/http's server.
func serverSide(req *http.Request) {
	if req.Body == nil {
		req.Body = http.NoBody
	}
	if req.RequestURI == "" {
		req.RequestURI = req.URL.RequestURI()
	}
	req.RemoteAddr = "127.0.0.1:0"
	if req.ContentLength == 0 && req.Body != http.NoBody {
		req.ContentLength = -1
	}
	if req.ContentLength > 0 {
		req.Header.Set("Content-Length", strconv.FormatInt(req.ContentLength, 10))
	}
}

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) WriteHeader(code int) {
	if w.status != 0 || code < 200 || code > 999 {
		return // informational responses are not forwarded
	}
	w.status = code
}

func (w *streamWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.dead {
		return 0, errStreamCancelled
	}
	if !w.sent {
		w.buf.Write(b)
		if w.buf.Len() >= 4096 {
			w.publish(false)
		}
		return len(b), nil
	}
	if !w.data(append([]byte(nil), b...), false) {
		return 0, errStreamCancelled
	}
	return len(b), nil
}

func (w *streamWriter) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.sent {
		w.publish(false)
	}
}

func (w *streamWriter) bodyless() bool {
	return w.req.Method == http.MethodHead || w.status == 204 || w.status == 304
}

// publish sends the response headers; final means the handler returned, so
// the buffered bytes are the whole body and go along. It reports whether
// the response is complete (nothing more to send).
func (w *streamWriter) publish(final bool) bool {
	w.sent = true
	if w.status == 0 {
		w.status = http.StatusOK
	}
	for _, v := range w.header.Values("Trailer") {
		if strings.TrimSpace(v) != "" {
			w.declared = true
		}
	}
	ev := upEvent{gen: w.gen, status: w.status, trlDecl: w.declared}
	body := w.buf.Bytes()
	switch {
	case w.bodyless():
		ev.headersEOS = true
	case final && !w.declared && !hasTrailerPrefix(w.header):
		if len(body) == 0 {
			ev.headersEOS = true
		} else {
			ev.data, ev.eos = append([]byte(nil), body...), true
		}
		w.header.Set("Content-Length", strconv.Itoa(len(body)))
	}
	hdr := make(hmap, 0, len(w.header)+1)
	hdr = append(hdr, hpair{":status", strconv.Itoa(w.status)})
	ev.hdr = appendHeader(hdr, w.header)
	if !w.send(ev) {
		return true
	}
	if !ev.headersEOS && ev.data == nil && len(body) > 0 {
		w.data(append([]byte(nil), body...), false)
	}
	w.buf.Reset()
	return ev.headersEOS || ev.eos
}

// data sends a chunk when the driver asks for one.
func (w *streamWriter) data(b []byte, eos bool) bool {
	px := &w.s.px
	select {
	case <-px.upMore:
	case <-px.done:
		w.dead = true
		return false
	case <-w.req.Context().Done():
		w.dead = true
		return false
	}
	return w.send(upEvent{gen: w.gen, data: b, eos: eos})
}

func (w *streamWriter) send(ev upEvent) bool {
	if w.dead || !w.s.sendUp(ev) {
		w.dead = true
		return false
	}
	return true
}

// finish ends the response when the handler returns.
func (w *streamWriter) finish() {
	if !w.sent && w.publish(true) {
		return
	}
	if w.dead || w.bodyless() {
		return
	}
	trl := w.trailers()
	px := &w.s.px
	select {
	case <-px.upMore:
	case <-px.done:
		return
	case <-w.req.Context().Done():
		return
	}
	if len(trl) > 0 {
		w.send(upEvent{gen: w.gen, eos: true, trl: trl})
		return
	}
	w.send(upEvent{gen: w.gen, eos: true})
}

// trailers gathers declared trailer values and TrailerPrefix headers.
func (w *streamWriter) trailers() hmap {
	t := http.Header{}
	for _, v := range w.header.Values("Trailer") {
		for _, k := range strings.Split(v, ",") {
			if k = http.CanonicalHeaderKey(strings.TrimSpace(k)); k != "" {
				if vs := w.header.Values(k); len(vs) > 0 {
					t[k] = vs
				}
			}
		}
	}
	for k, vs := range w.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			t[http.CanonicalHeaderKey(name)] = vs
		}
	}
	return appendHeader(nil, t)
}

func hasTrailerPrefix(h http.Header) bool {
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			return true
		}
	}
	return false
}

// bufferWriter collects a whole response, for callouts to handler clusters.
type bufferWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *bufferWriter) Header() http.Header { return w.header }
func (w *bufferWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
}
func (w *bufferWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}
func (w *bufferWriter) Flush() {}
