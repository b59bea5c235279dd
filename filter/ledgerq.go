package filter

import (
	"time"

	"github.com/tidwall/gjson"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// Ledger rows wait in a per-VM queue until the accountant acknowledges
// them: at most maxUnacked rows (sent and unacknowledged included); beyond
// that a row is dropped and counted, never blocking the proxy. Rows are
// idempotent by request id, so a batch whose answer was lost is simply sent
// again. Batches leave from the tick, and back to back from the answer to
// a full batch while a backlog remains; never from a stream (see
// RATIONALE.md, "Why are ledger rows sent only from the root context?").
const (
	maxUnacked   = 4096
	batchRows    = 256
	maxBackoff   = 30 * time.Second
	ingestTimout = 5 * time.Second
)

type rowQueue struct {
	rows     [][]byte // encoded rows, each a JSON line ending in '\n'
	head     int      // rows[head:] are unacknowledged
	inflight int      // rows[head:head+inflight] are in the batch in flight
	dropped  uint64   // rows dropped on overflow since start
	sent     uint64
	nextSend time.Time
	backoff  time.Duration
	body     []byte
	free     [][]byte // spent row buffers, reused
}

// lag is the number of rows not yet acknowledged (tee_lag_rows).
func (q *rowQueue) lag() int { return len(q.rows) - q.head }

// push queues an encoded row (copied), or drops it when the queue is full.
func (q *rowQueue) push(row []byte) bool {
	if q.lag() >= maxUnacked {
		q.dropped++
		return false
	}
	var b []byte
	if n := len(q.free); n > 0 {
		b, q.free = q.free[n-1][:0], q.free[:n-1]
	}
	q.rows = append(q.rows, append(b, row...))
	return true
}

// batch returns the next batch to send, or nil when nothing should be sent
// now (empty, a batch in flight, or backing off).
func (q *rowQueue) batch(now time.Time, force bool) []byte {
	if q.inflight > 0 || q.lag() == 0 || (!force && now.Before(q.nextSend)) {
		return nil
	}
	n := min(q.lag(), batchRows)
	q.body = q.body[:0]
	for _, r := range q.rows[q.head : q.head+n] {
		q.body = append(q.body, r...)
	}
	q.inflight = n
	return q.body
}

// acked records the answer to the batch in flight.
func (q *rowQueue) acked(now time.Time, ok bool) {
	if !ok {
		q.inflight = 0
		q.backoff = min(max(2*q.backoff, 500*time.Millisecond), maxBackoff)
		q.nextSend = now.Add(q.backoff)
		return
	}
	for i := q.head; i < q.head+q.inflight; i++ {
		q.free = append(q.free, q.rows[i])
		q.rows[i] = nil
	}
	q.sent += uint64(q.inflight)
	q.head += q.inflight
	q.inflight = 0
	q.backoff = 0
	q.nextSend = time.Time{}
	if len(q.free) > batchRows {
		q.free = q.free[:batchRows]
	}
	if q.head > 0 && q.head >= len(q.rows)/2 {
		n := copy(q.rows, q.rows[q.head:])
		clear(q.rows[n:])
		q.rows = q.rows[:n]
		q.head = 0
	}
}

// flushRows sends the next batch to the accountant when one is due.
func (e *Engine) flushRows(now time.Time, force bool) {
	if e.host.Caller == nil {
		return
	}
	body := e.rows.batch(now, force)
	if body == nil {
		return
	}
	n := e.rows.inflight
	err := e.host.Caller.Call("POST", syncwire.IngestPath, e.ingestHeaders, body, ingestTimout, func(status int, resp []byte) {
		t := e.host.Now()
		ok := status == 200
		if ok {
			if r := gjson.GetBytes(resp, "rejected"); r.Int() > 0 {
				e.logf(LogWarn, "accountant rejected %d of %d ledger rows: %s", r.Int(), n, gjson.GetBytes(resp, "errors").Raw)
			}
			e.host.Metrics.Add(MetricRowsSent, uint64(n))
		} else {
			e.logf(LogWarn, "sending %d ledger rows to the accountant failed (status %d); retrying", n, status)
		}
		e.rows.acked(t, ok)
		// A full batch means a backlog may be waiting: send the next one
		// now, from this callback (the root context), instead of one batch
		// per tick, so a VM serving more rows a tick than a batch holds
		// never falls behind its queue.
		if ok && n == batchRows && e.rows.lag() > 0 {
			e.flushRows(t, true)
		}
	})
	if err != nil {
		e.logf(LogWarn, "sending ledger rows to the accountant: %v", err)
		e.rows.acked(now, false)
	}
}
