package stub

import (
	"context"
	"net/http"
	"time"
)

// sse writes server-sent events, flushing each one, with an optional pause
// between events. After a failed write or a cancelled request it writes
// nothing more.
type sse struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	ctx   context.Context
	delay time.Duration
	n     int
	buf   []byte
	ok    bool
}

func newSSE(w http.ResponseWriter, ctx context.Context, delay time.Duration) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w), ctx: ctx, delay: delay, ok: true}
	_ = s.rc.Flush()
	return s
}

// event writes one event: "event: name" when name is set, then "data: ".
func (s *sse) event(name string, data []byte) {
	if !s.ok {
		return
	}
	if s.n > 0 && !sleep(s.ctx, s.delay) {
		s.ok = false
		return
	}
	s.n++
	b := s.buf[:0]
	if name != "" {
		b = append(append(append(b, "event: "...), name...), '\n')
	}
	b = append(append(append(b, "data: "...), data...), "\n\n"...)
	s.buf = b
	if _, err := s.w.Write(b); err != nil {
		s.ok = false
		return
	}
	if err := s.rc.Flush(); err != nil && s.ctx.Err() != nil {
		s.ok = false
	}
}
