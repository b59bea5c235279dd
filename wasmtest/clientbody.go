package wasmtest

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// The client's request body at the net/http edge. ServeHTTP reads a body
// on a goroutine of its own in net/http's full-duplex mode, so a response
// can stream while the body still arrives, and a stream the filter answers
// early (a local reply at the request headers) ends with the body unread.
// Left to net/http, two things then break a keep-alive connection: the
// host's reader may still be inside Body.Read when the handler returns,
// and in full-duplex mode net/http reads the rest of an unread body only
// when it closes it after the handler, where reaching its end restarts the
// connection's background read after net/http has stopped it. Either way
// the next request's read runs beside another, net/http panics with
// "invalid concurrent Body.Read call" and drops the connection. So the host
// finishes every body itself before ServeHTTP returns (RATIONALE.md, "Why
// does the host finish each request body itself?").

// drainGrace is how long a read in flight may take once the stream has
// ended, and how long the rest of the body may take to arrive, before the
// read is cut and the connection closed.
const drainGrace = time.Second

// maxDrain is the most of an unread body read to keep the connection:
// net/http's own limit for a handler that is not full duplex. A larger
// rest closes the connection instead, as it does.
const maxDrain = 256 << 10

// clientBody is a request body whose reads end with the stream.
type clientBody struct {
	rc      io.ReadCloser
	length  int64 // the declared Content-Length, -1 when unknown
	mu      sync.Mutex
	stopped bool
	read    int64
	eof     bool // a read returned io.EOF, or the declared length was read
	active  int  // reads in flight
	idle    chan struct{}
}

var _ io.ReadCloser = (*clientBody)(nil)

// withClientBody returns a shallow copy of r whose body is a clientBody.
// r itself is left alone: net/http inspects its body after the handler to
// decide whether the connection can be reused.
func withClientBody(r *http.Request) (*http.Request, *clientBody) {
	b := &clientBody{rc: r.Body, length: r.ContentLength}
	r2 := new(http.Request)
	*r2 = *r
	r2.Body = b
	return r2, b
}

func (b *clientBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return 0, http.ErrBodyReadAfterClose
	}
	b.active++
	b.mu.Unlock()
	n, err := b.rc.Read(p)
	b.mu.Lock()
	b.read += int64(n)
	b.eof = b.eof || err == io.EOF || b.read == b.length
	b.active--
	if b.active == 0 && b.idle != nil {
		close(b.idle)
		b.idle = nil
	}
	b.mu.Unlock()
	return n, err
}

// Close closes the underlying body; net/http closes it again after the
// handler, which is harmless.
func (b *clientBody) Close() error { return b.rc.Close() }

// stop refuses every later read and returns a channel closed when the
// read in flight returns, or nil when there is none.
func (b *clientBody) stop() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
	if b.active == 0 {
		return nil
	}
	b.idle = make(chan struct{})
	return b.idle
}

// finish ends the body once the stream has: the host's reads stop, a read
// in flight is waited for, and what the host left unread (up to maxDrain)
// is read here, inside the handler, as net/http does for a handler that is
// not full duplex, so the connection can serve the client's next request.
// The reply is flushed first, so the client never waits for this. When the
// rest is larger, net/http closes the connection after the reply; when it
// does not arrive within drainGrace (for a read in flight or for the
// drain), or arrives broken, finish aborts the handler, which closes the
// connection. A stream that was reset, or whose client left, loses its
// connection anyway: finish only stops the host's reads. The waits are on
// the wall clock, not the Host's Clock: they are network deadlines.
func (b *clientBody) finish(w http.ResponseWriter, res serveResult) {
	idle := b.stop()
	if res.reset || res.clientGone {
		return
	}
	b.mu.Lock()
	eof := b.eof
	b.mu.Unlock()
	if eof && idle == nil {
		return
	}
	rc := http.NewResponseController(w)
	rc.Flush()
	if idle != nil {
		t := time.NewTimer(drainGrace)
		select {
		case <-idle:
		case <-t.C:
			// The client sends no more: cut the read, and the connection.
			rc.SetReadDeadline(time.Now())
			<-idle
			abort(rc)
		}
		t.Stop()
	}
	b.mu.Lock()
	eof, rest := b.eof, b.length-b.read
	b.mu.Unlock()
	if eof {
		return
	}
	if b.length >= 0 && rest > maxDrain {
		// net/http does not read so large a rest after the handler: it
		// closes the connection instead (an early close).
		return
	}
	rc.SetReadDeadline(time.Now().Add(drainGrace))
	_, err := io.Copy(io.Discard, http.MaxBytesReader(innermost(w), b.rc, maxDrain))
	var tooBig *http.MaxBytesError
	switch {
	case err == nil, errors.Is(err, http.ErrBodyReadAfterClose):
		rc.SetReadDeadline(time.Time{})
	case errors.As(err, &tooBig):
		// MaxBytesReader has told net/http to close the connection after
		// the reply; its own close of the body need not wait for more.
		rc.SetReadDeadline(time.Now())
	default:
		// Stalled or malformed: what is left on the connection is not a
		// request.
		abort(rc)
	}
}

// abort sends what the reply has buffered and closes the connection.
func abort(rc *http.ResponseController) {
	rc.Flush()
	panic(http.ErrAbortHandler)
}

// innermost is the ResponseWriter under any wrappers, the one
// MaxBytesReader can tell to close the connection.
func innermost(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}
