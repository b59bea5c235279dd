package devserver

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// reqLog writes one log line per request the gateway answers: its
// method, path, status and time from the gateway's side, joined by
// request id with its ledger row (the key and its name, the limit that
// refused it, its tokens and cost), which reaches the accountant up to a
// flush interval later. A request whose row has not arrived within
// rowWait is written without those figures (a request answered before
// the filter ran, or a call of the model list, has none).
type reqLog struct {
	log   *slog.Logger
	names func(kids []string) map[string]string
	now   func() time.Time

	mu      sync.Mutex
	pending map[string]*reqLine // by request id: the gateway is done, the row is not here yet
	rows    map[string]rowInfo  // by request id: the row is here, the gateway is not done yet
	named   map[string]string   // key names looked up, by kid
	stop    chan struct{}
	done    chan struct{}
}

// rowWait is how long a finished request waits for its ledger row: a
// filter flushes rows every flush_interval (500 ms by default).
const rowWait = 3 * time.Second

// maxPending bounds what waits to be joined; past it the oldest lines are
// written as they are.
const maxPending = 4096

type reqLine struct {
	method, path string
	status       int
	took         time.Duration
	at           time.Time
}

// rowInfo is what a line takes from a ledger row (copied: a row may share
// memory with the ingest body).
type rowInfo struct {
	kid, refusedBy     string
	in, out            int64
	cost               int64
	unpriced, estimate bool
	priced             bool
	at                 time.Time
}

func newReqLog(log *slog.Logger, names func([]string) map[string]string) *reqLog {
	l := &reqLog{log: log, names: names, now: time.Now, pending: map[string]*reqLine{}, rows: map[string]rowInfo{},
		named: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

// wrap logs every request next answers, but dev's own readiness polls.
func (l *reqLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == MePath && r.Header.Get("User-Agent") == probeAgent {
			next.ServeHTTP(w, r)
			return
		}
		rw := &statusWriter{ResponseWriter: w}
		start := l.now()
		next.ServeHTTP(rw, r)
		status := rw.status
		if status == 0 {
			status = http.StatusOK
		}
		line := &reqLine{method: r.Method, path: r.URL.Path, status: status, took: l.now().Sub(start), at: l.now()}
		id := rw.Header().Get(wire.HeaderRequestID)
		l.finished(id, line)
	})
}

// finished joins a finished request with its row, or waits for it.
func (l *reqLog) finished(id string, line *reqLine) {
	if id == "" {
		l.write(line, nil)
		return
	}
	l.mu.Lock()
	row, ok := l.rows[id]
	if ok {
		delete(l.rows, id)
	} else {
		if len(l.pending) >= maxPending {
			l.flushLocked(time.Time{}, true)
		}
		l.pending[id] = line
	}
	l.mu.Unlock()
	if ok {
		l.write(line, &row)
	}
}

// ingested is the accountant's hook: rows it has recorded.
func (l *reqLog) ingested(rows []ledger.Row) {
	now := l.now()
	type joined struct {
		line *reqLine
		row  rowInfo
	}
	var out []joined
	l.mu.Lock()
	for i := range rows {
		r := &rows[i]
		if r.Kind != ledger.KindEnd || r.RequestID == "" {
			continue
		}
		info := rowInfo{kid: strings.Clone(r.KID), in: r.Usage.Input, out: r.Usage.Output, at: now}
		if r.RefusedBy != nil {
			info.refusedBy = strings.Clone(r.RefusedBy.LimitID)
		}
		if r.Cost != nil {
			info.cost, info.unpriced, info.priced = r.Cost.Nanos, r.Cost.Unpriced, true
		}
		info.estimate = r.Estimated.Input || r.Estimated.Output
		if line, ok := l.pending[r.RequestID]; ok {
			delete(l.pending, r.RequestID)
			out = append(out, joined{line, info})
			continue
		}
		if len(l.rows) < maxPending {
			l.rows[strings.Clone(r.RequestID)] = info
		}
	}
	l.mu.Unlock()
	for _, j := range out {
		l.write(j.line, &j.row)
	}
}

func (l *reqLog) run() {
	defer close(l.done)
	t := time.NewTicker(rowWait / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			l.mu.Lock()
			l.flushLocked(time.Time{}, true)
			l.mu.Unlock()
			return
		case <-t.C:
			l.mu.Lock()
			l.flushLocked(l.now().Add(-rowWait), false)
			l.mu.Unlock()
		}
	}
}

// flushLocked writes the lines waiting since before cutoff (every one
// when all) without a row, and forgets rows no request claimed; l.mu is
// held (the lines are written with it held: they are few).
func (l *reqLog) flushLocked(cutoff time.Time, all bool) {
	for id, line := range l.pending {
		if all || line.at.Before(cutoff) {
			delete(l.pending, id)
			l.write(line, nil)
		}
	}
	for id, r := range l.rows {
		if all || r.at.Before(cutoff.Add(-rowWait)) {
			delete(l.rows, id)
		}
	}
}

func (l *reqLog) close() {
	close(l.stop)
	<-l.done
}

// keyName is kid's name, "" when it has none (looked up once per kid).
func (l *reqLog) keyName(kid string) string {
	l.mu.Lock()
	name, ok := l.named[kid]
	l.mu.Unlock()
	if ok {
		return name
	}
	name = l.names([]string{kid})[kid]
	l.mu.Lock()
	if len(l.named) > 10_000 {
		clear(l.named)
	}
	l.named[kid] = name
	l.mu.Unlock()
	return name
}

// write logs one request: method, path, status, milliseconds, and from its
// row the key (name and kid), the limit that refused it, tokens and cost.
func (l *reqLog) write(line *reqLine, row *rowInfo) {
	attrs := []any{"method", line.method, "path", line.path, "status", line.status, "ms", line.took.Milliseconds()}
	if row == nil {
		attrs = append(attrs, "row", "none")
		l.log.Info("request", attrs...)
		return
	}
	key := "(none)"
	if row.kid != "" {
		key = row.kid
		if name := l.keyName(row.kid); name != "" {
			key = name + " (" + row.kid + ")"
		}
	}
	attrs = append(attrs, "key", key)
	if row.refusedBy != "" {
		attrs = append(attrs, "refused_by", row.refusedBy)
	}
	attrs = append(attrs, "tokens", strconv.FormatInt(row.in, 10)+"+"+strconv.FormatInt(row.out, 10))
	switch {
	case !row.priced:
		attrs = append(attrs, "cost", "none")
	case row.unpriced:
		attrs = append(attrs, "cost", "UNPRICED")
	default:
		c := "$" + config.USDFromNanos(row.cost).String()
		if row.estimate {
			c += " (estimated)"
		}
		attrs = append(attrs, "cost", c)
	}
	l.log.Info("request", attrs...)
}

// statusWriter records the status a handler answers with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes a flush on (a stream's events go out as they come).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
