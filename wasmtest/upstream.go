package wasmtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Cluster is where requests go: the proxied upstream, or a cluster the
// filter calls out to by name. Set Handler to serve in process, or URL (a
// base such as "http://127.0.0.1:8791" or "https://api.example.com/prefix")
// to go over the network.
type Cluster struct {
	Handler http.Handler
	URL     string
	// Transport carries URL requests; nil is a *http.Transport of the host's
	// own, tuned for a proxy (keep-alive, many idle connections per host, no
	// transparent decompression).
	Transport http.RoundTripper
}

// target is a resolved Cluster.
type target struct {
	rt     http.RoundTripper
	base   *url.URL // nil for a handler
	inProc bool
}

func newTarget(c Cluster, name string, def http.RoundTripper) (*target, error) {
	switch {
	case c.Handler != nil && c.URL != "":
		return nil, fmt.Errorf("wasmtest: cluster %q: set Handler or URL, not both", name)
	case c.Handler != nil:
		return &target{rt: handlerTransport{c.Handler}, inProc: true}, nil
	case c.URL != "":
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("wasmtest: cluster %q: URL %q must be an absolute http or https URL such as http://127.0.0.1:8791", name, c.URL)
		}
		u.Path = strings.TrimSuffix(u.Path, "/")
		rt := c.Transport
		if rt == nil {
			rt = def
		}
		return &target{rt: rt, base: u}, nil
	}
	return nil, fmt.Errorf("wasmtest: cluster %q: set Handler (in process) or URL (over the network)", name)
}

// newProxyTransport is the transport URL clusters share by default.
func newProxyTransport() *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     true,
	}
}

// request builds the request sent to the target from a header map in the
// pair format (pseudo-headers :method, :path, :authority, :scheme).
func (t *target) request(ctx context.Context, hdr hmap, body io.ReadCloser, length int64) (*http.Request, error) {
	method, _ := hdr.get(":method")
	if method == "" {
		method = http.MethodGet
	}
	path, _ := hdr.get(":path")
	if path == "" {
		path = "/"
	}
	authority, _ := hdr.get(":authority")
	var u *url.URL
	var err error
	if t.base != nil {
		u, err = url.ParseRequestURI(path)
		if err == nil {
			u.Scheme = t.base.Scheme
			u.Host = t.base.Host
			if t.base.Path != "" {
				u.Path = t.base.Path + u.Path
				if u.RawPath != "" {
					u.RawPath = t.base.EscapedPath() + u.RawPath
				}
			}
		}
	} else {
		u, err = url.ParseRequestURI(path)
		if err == nil {
			u.Scheme = "http"
			u.Host = authority
		}
	}
	if err != nil {
		return nil, fmt.Errorf(":path %q is not a request target: %w", path, err)
	}
	req := &http.Request{
		Method:        method,
		URL:           u,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        make(http.Header, len(hdr)),
		Body:          body,
		ContentLength: length,
		Host:          authority,
	}
	if body == http.NoBody {
		req.ContentLength = 0
	}
	hdr.toHeader(req.Header, "host", "content-length")
	return req.WithContext(ctx), nil
}

// handlerTransport serves a request with an http.Handler in process, the
// response streaming back as the handler writes and flushes.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// The request is the host's own (target.request built it), so it is
	// turned into a server-side request in place rather than cloned.
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
	w := newPipeWriter(req)
	go w.serve(t.h, req)
	select {
	case <-w.ready:
		if w.resp == nil {
			return nil, w.err
		}
		return w.resp, nil
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
}

// pipeWriter is the ResponseWriter a handler upstream writes to. Writes are
// held until the handler flushes, fills 4 KiB or returns (as net/http's
// server does), so a small response gets an exact Content-Length.
type pipeWriter struct {
	req      *http.Request
	header   http.Header
	status   int
	buf      bytes.Buffer
	pr       *io.PipeReader
	pw       *io.PipeWriter
	resp     *http.Response
	err      error
	ready    chan struct{}
	once     sync.Once
	sent     bool
	declared []string
	mu       sync.Mutex
	trailers http.Header
}

func newPipeWriter(req *http.Request) *pipeWriter {
	return &pipeWriter{req: req, header: http.Header{}, ready: make(chan struct{})}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	if w.status != 0 || code < 100 || code > 999 {
		return
	}
	if code < 200 {
		return // informational responses are not forwarded
	}
	w.status = code
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.sent {
		w.buf.Write(b)
		if w.buf.Len() >= 4096 {
			w.send(false)
		}
		return len(b), nil
	}
	return w.pw.Write(b)
}

func (w *pipeWriter) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.sent {
		w.send(false)
	}
}

// send publishes the response; final means the handler has returned, so the
// body is exactly what is buffered.
func (w *pipeWriter) send(final bool) {
	w.sent = true
	h := w.header.Clone()
	resp := &http.Response{
		Status:     fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)),
		StatusCode: w.status,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Request:    w.req,
	}
	for _, v := range h.Values("Trailer") {
		for _, k := range strings.Split(v, ",") {
			if k = strings.TrimSpace(k); k != "" {
				w.declared = append(w.declared, http.CanonicalHeaderKey(k))
			}
		}
	}
	h.Del("Trailer")
	if len(w.declared) > 0 {
		resp.Trailer = http.Header{}
		for _, k := range w.declared {
			resp.Trailer[k] = nil
		}
	}
	bodyless := w.req.Method == http.MethodHead || w.status == 204 || w.status == 304
	switch {
	case bodyless:
		resp.Body = http.NoBody
		resp.ContentLength = 0
	case final && len(w.declared) == 0 && !hasTrailerPrefix(h):
		resp.ContentLength = int64(w.buf.Len())
		if h.Get("Content-Length") == "" || h.Get("Content-Length") != fmt.Sprint(w.buf.Len()) {
			h.Set("Content-Length", fmt.Sprint(w.buf.Len()))
		}
		if w.buf.Len() == 0 {
			resp.Body = http.NoBody
		} else {
			resp.Body = io.NopCloser(bytes.NewReader(w.buf.Bytes()))
		}
	default:
		resp.ContentLength = -1
		if cl := h.Get("Content-Length"); cl != "" && len(w.declared) == 0 {
			var n int64
			if _, err := fmt.Sscan(cl, &n); err == nil {
				resp.ContentLength = n
			}
		}
		w.pr, w.pw = io.Pipe()
		pending := append([]byte(nil), w.buf.Bytes()...)
		w.buf.Reset()
		resp.Body = &prefixReader{pending: pending, r: w.pr, w: w}
		if resp.Trailer == nil {
			resp.Trailer = http.Header{}
		}
	}
	w.resp = resp
	w.once.Do(func() { close(w.ready) })
}

func hasTrailerPrefix(h http.Header) bool {
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			return true
		}
	}
	return false
}

var errHandlerAborted = errors.New("wasmtest: upstream handler aborted the response")

func (w *pipeWriter) serve(h http.Handler, req *http.Request) {
	defer func() {
		if r := recover(); r != nil {
			if !w.sent {
				w.err = fmt.Errorf("%w: %v", errHandlerAborted, r)
				w.once.Do(func() { close(w.ready) })
				return
			}
			if w.pw != nil {
				w.pw.CloseWithError(errHandlerAborted)
			}
		}
	}()
	h.ServeHTTP(w, req)
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.sent {
		w.send(true)
	}
	if w.pw != nil {
		w.collectTrailers()
		w.pw.Close()
	}
}

// collectTrailers gathers declared trailer values and TrailerPrefix headers
// when the handler returns; the body reader publishes them into the
// response's Trailer when it reaches EOF, as net/http's transport does.
func (w *pipeWriter) collectTrailers() {
	t := http.Header{}
	for _, k := range w.declared {
		if vs := w.header.Values(k); len(vs) > 0 {
			t[k] = vs
		}
	}
	for k, vs := range w.header {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			t[http.CanonicalHeaderKey(strings.TrimPrefix(k, http.TrailerPrefix))] = vs
		}
	}
	w.mu.Lock()
	w.trailers = t
	w.mu.Unlock()
}

// prefixReader reads pending, then r.
type prefixReader struct {
	pending []byte
	r       *io.PipeReader
	w       *pipeWriter
}

func (p *prefixReader) Read(b []byte) (int, error) {
	if len(p.pending) > 0 {
		n := copy(b, p.pending)
		p.pending = p.pending[n:]
		return n, nil
	}
	n, err := p.r.Read(b)
	if err == io.EOF {
		p.w.mu.Lock()
		for k, vs := range p.w.trailers {
			p.w.resp.Trailer[k] = vs
		}
		p.w.mu.Unlock()
	}
	return n, err
}

func (p *prefixReader) Close() error { return p.r.Close() }
