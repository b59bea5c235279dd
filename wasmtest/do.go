package wasmtest

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Request is a request as a client sends it, body in the chunks it arrives in.
type Request struct {
	// Method defaults to GET, or POST when there are body chunks.
	Method string
	// Path is the request target, e.g. "/v1/chat/completions?x=1"; "/" by default.
	Path string
	// Host is the authority; Headers' Host, else "localhost".
	Host    string
	Headers http.Header
	// BodyChunks reach the filter one by one, as if they arrived apart.
	BodyChunks [][]byte
	// Chunked sends the body without a length (transfer-encoding chunked):
	// the end of stream then comes as an empty last body callback.
	Chunked bool
	// Trailers are sent after the body (Chunked is implied).
	Trailers http.Header
	// VM picks worker VM n (1-based); 0 takes the next in turn.
	VM int
	// Context, when cancelled, is the client going away.
	Context context.Context
}

// Response is what the client saw.
type Response struct {
	Status  int
	Headers http.Header
	Body    []byte
	// Chunks are the body as the client received it, write by write.
	Chunks   [][]byte
	Trailers http.Header
	// Reset is a stream that ended without a complete response (the
	// connection would have been dropped).
	Reset bool
	// Upstream reports that the request went upstream: its headers left
	// the filter and the upstream exchange began (it may have been reset
	// since, by a local reply at the body).
	Upstream bool
	// Counts are the guest/host calls this stream made.
	Counts Counts
}

// Do sends req through the host exactly as ServeHTTP would serve it and
// returns what the client would see.
func (h *Host) Do(req Request) Response {
	r := req.httpRequest()
	rec := &recorder{header: http.Header{}}
	res := h.serve(rec, r, req.VM)
	out := Response{
		Status:  rec.status,
		Headers: rec.header,
		Body:    rec.body,
		Chunks:  rec.chunks,
		Reset:   res.reset,

		Upstream: res.upstream,
		Counts:   res.counts,
	}
	if out.Status == 0 && !res.reset {
		out.Status = http.StatusOK
	}
	for k, vs := range rec.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			if out.Trailers == nil {
				out.Trailers = http.Header{}
			}
			out.Trailers[http.CanonicalHeaderKey(name)] = vs
			delete(rec.header, k)
		}
	}
	return out
}

func (req Request) httpRequest() *http.Request {
	method := req.Method
	if method == "" {
		method = http.MethodGet
		if len(req.BodyChunks) > 0 {
			method = http.MethodPost
		}
	}
	path := req.Path
	if path == "" {
		path = "/"
	}
	u, err := url.ParseRequestURI(path)
	if err != nil {
		u = &url.URL{Path: path}
	}
	hdr := req.Headers.Clone()
	if hdr == nil {
		hdr = http.Header{}
	}
	host := req.Host
	if host == "" {
		host = hdr.Get("Host")
	}
	if host == "" {
		host = "localhost"
	}
	hdr.Del("Host")
	var total int64
	for _, c := range req.BodyChunks {
		total += int64(len(c))
	}
	ctx := req.Context
	if ctx == nil {
		ctx = context.Background()
	}
	r := &http.Request{
		Method:     method,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     hdr,
		Host:       host,
		RemoteAddr: "192.0.2.10:40000",
		RequestURI: path,
		Body:       http.NoBody,
	}
	chunked := req.Chunked || len(req.Trailers) > 0
	if len(req.BodyChunks) > 0 || chunked {
		r.Body = &chunkReader{chunks: req.BodyChunks, trailers: req.Trailers, r: r}
		r.ContentLength = total
		if chunked {
			r.ContentLength = -1
			r.TransferEncoding = []string{"chunked"}
		} else {
			hdr.Set("Content-Length", itoa(total))
		}
		if len(req.Trailers) > 0 {
			r.Trailer = http.Header{}
			for k := range req.Trailers {
				r.Trailer[http.CanonicalHeaderKey(k)] = nil
			}
		}
	}
	return r.WithContext(ctx)
}

// chunkReader returns one chunk per Read, then fills the trailers and EOF.
type chunkReader struct {
	chunks   [][]byte
	cur      []byte
	trailers http.Header
	r        *http.Request
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.cur) == 0 {
		if len(c.chunks) == 0 {
			for k, vs := range c.trailers {
				c.r.Trailer[http.CanonicalHeaderKey(k)] = vs
			}
			return 0, io.EOF
		}
		c.cur, c.chunks = c.chunks[0], c.chunks[1:]
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

func (c *chunkReader) Close() error { return nil }

// recorder is the ResponseWriter of Do.
type recorder struct {
	header http.Header
	status int
	body   []byte
	chunks [][]byte
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status != 0 {
		return
	}
	r.status = code
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	r.body = append(r.body, b...)
	r.chunks = append(r.chunks, append([]byte(nil), b...))
	return len(b), nil
}

func (r *recorder) Flush() {}

// EnableFullDuplex lets http.ResponseController find the recorder
// full-duplex, as an HTTP/2 connection is.
func (r *recorder) EnableFullDuplex() error { return nil }

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	neg := n < 0
	if neg {
		n = -n
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
