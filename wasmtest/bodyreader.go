package wasmtest

import (
	"io"
	"net/http"
)

// bodyReader turns a body (the client's request, the upstream's response)
// into the events the filter sees: chunks as they arrive, end of stream on
// the last one when the length says so (else with an empty last chunk, as
// for chunked HTTP/1), then trailers when there are any.
type bodyReader struct {
	r        io.Reader
	length   int64 // -1 unknown
	trailer  http.Header
	declared bool
	total    int64
	scratch  []byte
	heldTrl  hmap // trailers read along with the last data, for the next call
	done     bool
}

type bodyEvent struct {
	data []byte
	eos  bool
	trl  hmap
	err  error
}

func newBodyReader(r io.Reader, length int64, trailer http.Header) *bodyReader {
	return &bodyReader{r: r, length: length, trailer: trailer, declared: len(trailer) > 0}
}

// next reads one event. After the end (or an error) it keeps returning
// the end.
func (b *bodyReader) next() bodyEvent {
	if b.heldTrl != nil {
		t := b.heldTrl
		b.heldTrl = nil
		b.done = true
		return bodyEvent{eos: true, trl: t}
	}
	if b.done {
		return bodyEvent{eos: true}
	}
	for {
		// A body of known small length is read straight into a slice of its
		// size; anything else through a reused buffer, copied out at the size
		// that arrived (an SSE event is a few hundred bytes).
		var buf []byte
		reused := false
		if b.length > 0 && b.length-b.total <= 32<<10 {
			n := b.length - b.total
			if n <= 0 {
				n = 1
			}
			buf = make([]byte, n)
		} else {
			if b.scratch == nil {
				b.scratch = make([]byte, 32<<10)
			}
			buf, reused = b.scratch, true
		}
		n, err := b.r.Read(buf)
		b.total += int64(n)
		if n == 0 && err == nil {
			continue
		}
		var data []byte
		if n > 0 {
			if reused {
				data = append([]byte(nil), buf[:n]...)
			} else {
				data = buf[:n:n]
			}
		}
		switch {
		case err == nil && b.length >= 0 && b.total == b.length && !b.declared:
			b.done = true
			return bodyEvent{data: data, eos: true}
		case err == nil:
			return bodyEvent{data: data}
		case err == io.EOF:
			if b.length >= 0 && b.total < b.length {
				b.done = true
				return bodyEvent{data: data, err: io.ErrUnexpectedEOF}
			}
			trl := appendHeader(nil, b.trailer)
			if len(trl) == 0 {
				b.done = true
				return bodyEvent{data: data, eos: true}
			}
			if data != nil {
				b.heldTrl = trl
				return bodyEvent{data: data}
			}
			b.done = true
			return bodyEvent{eos: true, trl: trl}
		default:
			b.done = true
			return bodyEvent{data: data, err: err}
		}
	}
}

// pump reads events one at a time, each when asked on more, until the end,
// an error, a refused send or done.
func (b *bodyReader) pump(more, done <-chan struct{}, send func(bodyEvent) bool) {
	for {
		select {
		case <-more:
		case <-done:
			return
		}
		ev := b.next()
		if !send(ev) || ev.eos || ev.err != nil {
			return
		}
	}
}
