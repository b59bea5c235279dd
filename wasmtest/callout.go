package wasmtest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// HTTP callouts (shared/proxy-wasm.md 3.5). A call belongs to the root
// context of its VM whoever made it; its id is 4, 8, 12, … per VM. The
// exchange runs on its own goroutine and its result is delivered to
// proxy_on_http_call_response on the root context when the VM is free, so
// never inside the callback that made it. A failure is delivered as
// (0, 0, 0) with proxy_get_status (11, "reset"); a timeout, measured on the
// host's Clock, as a synthetic 504 from the async client.

type callout struct {
	v      *vm
	id     uint32
	cancel context.CancelFunc
	timer  Timer
	done   bool // delivered or cancelled (under v.mu)
}

// calloutResponse is what the callback can read: maps 6 and 7, buffer 4.
type calloutResponse struct {
	headers  hmap
	body     []byte
	trailers hmap
	failed   bool
}

// calloutTracker counts calls in flight so tests can wait for them.
type calloutTracker struct {
	mu   sync.Mutex
	n    int
	idle chan struct{}
}

func (t *calloutTracker) add() {
	t.mu.Lock()
	t.n++
	t.mu.Unlock()
}

func (t *calloutTracker) doneOne() {
	t.mu.Lock()
	t.n--
	if t.n == 0 && t.idle != nil {
		close(t.idle)
		t.idle = nil
	}
	t.mu.Unlock()
}

func (t *calloutTracker) wait(ctx context.Context) error {
	t.mu.Lock()
	if t.n == 0 {
		t.mu.Unlock()
		return nil
	}
	if t.idle == nil {
		t.idle = make(chan struct{})
	}
	ch := t.idle
	t.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// proxy_http_call(upstream_ptr, upstream_size, headers_ptr, headers_size,
// body_ptr, body_size, trailers_ptr, trailers_size, timeout_ms, ret_call_id)
func hostHTTPCall(v *vm, s []uint64) {
	up, ok1 := v.read(uint32(s[0]), uint32(s[1]))
	hb, ok2 := v.read(uint32(s[2]), uint32(s[3]))
	body, ok3 := v.read(uint32(s[4]), uint32(s[5]))
	tb, ok4 := v.read(uint32(s[6]), uint32(s[7]))
	timeout := int32(uint32(s[8]))
	ret := uint32(s[9])
	if !ok1 || !ok2 || !ok3 || !ok4 || !v.putU32(ret, 0) {
		s[0] = statusInvalidMemoryAccess
		return
	}
	if timeout < 0 {
		s[0] = statusBadArgument
		return
	}
	t, ok := v.h.clusters[string(up)]
	if !ok {
		v.h.logs.add(v.index, v.name, LogDebug, "http call to unknown cluster "+strconv.Quote(string(up)))
		s[0] = statusBadArgument
		return
	}
	hdr, ok := parsePairs(hb)
	if !ok {
		s[0] = statusBadArgument
		return
	}
	for _, k := range []string{":method", ":path", ":authority"} {
		// Envoy checks presence only: an empty :authority is sent as
		// it is (the cluster picks the destination).
		if _, ok := hdr.get(k); !ok {
			s[0] = statusBadArgument
			return
		}
	}
	trl, ok := parsePairs(tb)
	if !ok {
		s[0] = statusBadArgument
		return
	}
	var rb io.ReadCloser = http.NoBody
	if len(body) > 0 {
		rb = io.NopCloser(bytes.NewReader(append([]byte(nil), body...)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, err := t.request(ctx, hdr, rb, int64(len(body)))
	if err != nil {
		cancel()
		v.h.logs.add(v.index, v.name, LogDebug, "http call: "+err.Error())
		s[0] = statusBadArgument
		return
	}
	if len(trl) > 0 {
		req.Trailer = http.Header{}
		trl.toHeader(req.Trailer)
		req.ContentLength = -1
	}
	v.nextCall += 4
	for v.nextCall == 0 || v.calls[v.nextCall] != nil {
		v.nextCall += 4
	}
	c := &callout{v: v, id: v.nextCall, cancel: cancel}
	v.calls[c.id] = c
	v.h.callouts.add()
	if timeout > 0 {
		c.timer = v.h.clock.AfterFunc(time.Duration(timeout)*time.Millisecond, c.timedOut)
	}
	go c.run(t, req)
	v.putU32(ret, c.id)
	s[0] = statusOK
}

// run performs the exchange, reading the whole response.
func (c *callout) run(t *target, req *http.Request) {
	if t.handler != nil {
		c.runHandler(t.handler, req)
		return
	}
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		c.deliver(&calloutResponse{failed: true})
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.deliver(&calloutResponse{failed: true})
		return
	}
	hdr := make(hmap, 0, len(resp.Header)+1)
	hdr = append(hdr, hpair{":status", strconv.Itoa(resp.StatusCode)})
	hdr = appendHeader(hdr, resp.Header)
	c.deliver(&calloutResponse{headers: hdr, body: body, trailers: appendHeader(nil, resp.Trailer)})
}

// runHandler serves the call in process; a handler that panics is a reset.
func (c *callout) runHandler(h http.Handler, req *http.Request) {
	serverSide(req)
	w := &bufferWriter{header: http.Header{}}
	failed := true
	defer func() {
		recover()
		if failed {
			c.deliver(&calloutResponse{failed: true})
		}
	}()
	h.ServeHTTP(w, req)
	failed = false
	if w.status == 0 {
		w.status = http.StatusOK
	}
	var trl http.Header
	for k, vs := range w.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			if trl == nil {
				trl = http.Header{}
			}
			trl[http.CanonicalHeaderKey(name)] = vs
			delete(w.header, k)
		}
	}
	w.header.Del("Trailer")
	if w.header.Get("Content-Length") == "" {
		w.header.Set("Content-Length", strconv.Itoa(w.body.Len()))
	}
	hdr := make(hmap, 0, len(w.header)+1)
	hdr = append(hdr, hpair{":status", strconv.Itoa(w.status)})
	hdr = appendHeader(hdr, w.header)
	c.deliver(&calloutResponse{headers: hdr, body: w.body.Bytes(), trailers: appendHeader(nil, trl)})
}

// timedOut is Envoy's async client timing out: a 504 it makes up itself.
// deliver cancels the exchange once the 504 is in, so a late answer loses.
func (c *callout) timedOut() {
	body := []byte("upstream request timeout")
	c.deliver(&calloutResponse{
		headers: hmap{{":status", "504"}, {"content-length", strconv.Itoa(len(body))}, {"content-type", "text/plain"}},
		body:    body,
	})
}

// deliver calls proxy_on_http_call_response once, with the VM locked.
func (c *callout) deliver(r *calloutResponse) {
	v := c.v
	v.mu.Lock()
	defer v.mu.Unlock()
	if c.done {
		return
	}
	c.done = true
	delete(v.calls, c.id)
	if c.timer != nil {
		c.timer.Stop()
	}
	c.cancel()
	defer v.h.callouts.doneOne()
	if v.failed.Load() || v.closed || !v.rootAlive {
		return
	}
	v.enterRoot()
	v.callResp = r
	nh, nt := len(r.headers), len(r.trailers)
	if r.failed {
		v.statusCod, v.statusMsg = statusBrokenConnection, "reset"
		v.callResp = nil
		nh, nt = 0, 0
	}
	v.call(v.fn.callResponse, "proxy_on_http_call_response", uint64(v.rootID), uint64(c.id), uint64(nh), uint64(len(r.body)), uint64(nt))
	v.callResp = nil
	v.statusCod, v.statusMsg = 0, ""
	v.afterCall(nil)
}

// cancelCallouts drops every pending call (the root context is going away
// or the VM failed); none of them is delivered.
func (v *vm) cancelCallouts() {
	for id, c := range v.calls {
		c.done = true
		c.cancel()
		if c.timer != nil {
			c.timer.Stop()
		}
		delete(v.calls, id)
		v.h.callouts.doneOne()
	}
}
