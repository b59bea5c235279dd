package devserver

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// gateway is the handler the gateway's listener serves: the proxy-wasm
// host, with the request body finished at the net/http edge. The host
// reads a body on a goroutine of its own, in full-duplex mode (so the
// response can stream while the body arrives), and a stream the filter
// answers early (a 401 or a 429 at the request headers) ends with the body
// unread. Two things then break the keep-alive connection, and a client's
// next request on it fails with a reset:
//
//   - the host's reader may still be inside Body.Read when the handler
//     returns, while net/http reads the connection's next request;
//   - in full-duplex mode net/http reads the rest of an unread body only
//     when it closes it after the handler, and reaching its end there
//     starts the connection's background read after net/http has already
//     stopped it, so the next request's read runs beside it.
//
// net/http answers both with "invalid concurrent Body.Read call" and drops
// the connection. So each body is wrapped: once the host has returned, no
// new read of the host's reaches the connection, a read in flight is
// waited for, and the rest of the body (up to maxDrain) is read here,
// inside the handler, as net/http does for a handler that is not full
// duplex (RATIONALE.md, "Why does `tokentriage dev` finish each request
// body itself?").
type gateway struct{ host http.Handler }

var _ http.Handler = gateway{}

// joinGrace is how long a read in flight may take after the host returned,
// and how long the rest of the body may take to arrive, before the
// connection's read deadline cuts it (the connection is then not reused).
const joinGrace = time.Second

// maxDrain is the most of an unread body read to keep the connection
// (net/http's own limit for a handler that leaves its body unread); a
// larger rest closes the connection instead.
const maxDrain = 256 << 10

func (g gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		g.host.ServeHTTP(w, r)
		return
	}
	b := &joinedBody{rc: r.Body, length: r.ContentLength}
	r.Body = b
	defer b.join(w) // also when the host aborts the response with a panic
	g.host.ServeHTTP(w, r)
}

// joinedBody is a request body whose reads end with the handler.
type joinedBody struct {
	rc     io.ReadCloser
	length int64 // the declared Content-Length, -1 when unknown
	mu     sync.Mutex
	done   bool
	read   int64
	eof    bool // a read returned io.EOF
	active int
	idle   chan struct{} // closed when the last read in flight returns after join
}

func (b *joinedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.done {
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

func (b *joinedBody) Close() error { return b.rc.Close() }

// join ends the host's reads of the body, waits for one in flight, and
// reads what the host left unread.
func (b *joinedBody) join(w http.ResponseWriter) {
	b.mu.Lock()
	b.done = true
	var idle chan struct{}
	if b.active > 0 {
		idle = make(chan struct{})
		b.idle = idle
	}
	b.mu.Unlock()
	rc := http.NewResponseController(w)
	if idle != nil {
		t := time.NewTimer(joinGrace)
		select {
		case <-idle:
		case <-t.C:
			// The client sends no more: cut the read; the connection is
			// then not reused.
			rc.SetReadDeadline(time.Now())
			<-idle
		}
		t.Stop()
	}
	b.mu.Lock()
	eof := b.eof
	b.mu.Unlock()
	if eof {
		return
	}
	rc.SetReadDeadline(time.Now().Add(joinGrace))
	io.CopyN(io.Discard, b.rc, maxDrain)
	rc.SetReadDeadline(time.Time{})
}
