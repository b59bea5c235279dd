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
// again. A batch leaves as soon as a row is queued when none is in flight
// (through a call answered on the plugin context, so the stream that
// queued it may end at once), from the answer to the previous batch while
// rows wait, and from the tick; at most one batch is in flight, and sends
// are at least minSendGap apart unless a full batch waits (see
// RATIONALE.md, "Why does a row leave as its request ends?").
const (
	maxUnacked   = 4096
	batchRows    = 256
	maxBackoff   = 30 * time.Second
	ingestTimout = 5 * time.Second
)

// rowQueue keeps the encoded rows back to back in one buffer, each a JSON
// line ending in '\n', so that a batch is a slice of it rather than a copy
// (a 256-row batch is about 150 KB, and the guest copies memory slowly) and
// a row is encoded straight into place.
type rowQueue struct {
	data     []byte // rows[0:] encoded back to back
	ends     []int  // ends[i] is where row i ends in data
	head     int    // rows head and later are unacknowledged
	inflight int    // rows head to head+inflight are in the batch in flight
	dropped  uint64 // rows dropped on overflow since start
	// droppedAt is when the last row was dropped (unix ns), 0 never.
	droppedAt int64
	sent      uint64
	nextSend  time.Time
	backoff   time.Duration
	lastSend  time.Time // when the last batch left
}

// lag is the number of rows not yet acknowledged (tee_lag_rows).
func (q *rowQueue) lag() int { return len(q.ends) - q.head }

// start is where row i begins in data.
func (q *rowQueue) start(i int) int {
	if i == 0 {
		return 0
	}
	return q.ends[i-1]
}

// room reports whether one more row fits; when it does not, the row is
// counted as dropped.
func (q *rowQueue) room() bool {
	if q.lag() >= maxUnacked {
		q.dropped++
		return false
	}
	return true
}

// add ends the row just appended to data (the caller appends it after
// room said yes).
func (q *rowQueue) add() {
	q.data = append(q.data, '\n')
	q.ends = append(q.ends, len(q.data))
}

// push queues an encoded row ending in '\n' (copied), or drops it when the
// queue is full.
func (q *rowQueue) push(row []byte) bool {
	if !q.room() {
		return false
	}
	q.data = append(q.data, row...)
	q.ends = append(q.ends, len(q.data))
	return true
}

// batch returns the next batch to send, or nil when nothing should be sent
// now (empty, a batch in flight, or backing off). It is a slice of the
// queue's buffer: the host copies it when the call is made.
func (q *rowQueue) batch(now time.Time, force bool) []byte {
	if q.inflight > 0 || q.lag() == 0 || (!force && now.Before(q.nextSend)) {
		return nil
	}
	n := min(q.lag(), batchRows)
	q.inflight = n
	return q.data[q.start(q.head):q.ends[q.head+n-1]]
}

// acked records the answer to the batch in flight.
func (q *rowQueue) acked(now time.Time, ok bool) {
	if !ok {
		q.inflight = 0
		q.backoff = min(max(2*q.backoff, 500*time.Millisecond), maxBackoff)
		q.nextSend = now.Add(q.backoff)
		return
	}
	q.sent += uint64(q.inflight)
	q.head += q.inflight
	q.inflight = 0
	q.backoff = 0
	q.nextSend = time.Time{}
	// Compact once half the rows are spent: the unsent tail moves to the
	// front (usually a few rows), and the buffer keeps its capacity.
	if q.head > 0 && q.head >= len(q.ends)/2 {
		off := q.start(q.head)
		n := copy(q.data, q.data[off:])
		q.data = q.data[:n]
		m := copy(q.ends, q.ends[q.head:])
		q.ends = q.ends[:m]
		for i := range q.ends {
			q.ends[i] -= off
		}
		q.head = 0
	}
}

// flushRows sends the next batch to the accountant when one is due (the
// tick, and the answer to a full batch).
func (e *Engine) flushRows(now time.Time, force bool) {
	if e.host.Caller == nil {
		return
	}
	e.sendRows(now, force, e.host.Caller.Call)
}

// minSendGap is the least time between two batches that are not full: a
// tenth of the flush interval (10 ms in dev, 50 ms by default), so a VM
// sends at most ten batches a flush interval however its rows trickle in.
func (e *Engine) minSendGap() time.Duration { return max(e.flushEvery/10, 5*time.Millisecond) }

// sendRowsNow sends the queued rows at once, from the stream that just
// queued one, when no batch is in flight, the accountant is not being
// backed off, and the last batch left at least minSendGap ago; otherwise
// the answer to the batch in flight, or the tick, sends them. The call is
// answered on the plugin context: the stream ends right after.
func (e *Engine) sendRowsNow(now time.Time) {
	pc, ok := e.host.Caller.(PluginCaller)
	if !ok || e.finishing != nil || now.Sub(e.rows.lastSend) < e.minSendGap() {
		return
	}
	e.sendRows(now, false, pc.CallForPlugin)
}

type callFunc func(method, path string, headers [][2]string, body []byte, timeout time.Duration, cb func(int, []byte)) error

// sendRows sends the next batch through call when one is due.
func (e *Engine) sendRows(now time.Time, force bool, call callFunc) {
	body := e.rows.batch(now, force)
	if body == nil {
		return
	}
	n := e.rows.inflight
	e.rows.lastSend = now
	err := call("POST", syncwire.IngestPath, e.ingestHeaders, body, ingestTimout, func(status int, resp []byte) {
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
		if e.finishing != nil {
			e.finishStep(t, ok)
			return
		}
		// Rows that arrived while this batch was out leave now, from this
		// callback (the plugin context), instead of at the next tick: back
		// to back after a full batch (a backlog drains within one tick),
		// else minSendGap apart.
		if ok && e.rows.lag() > 0 && (n == batchRows || t.Sub(e.rows.lastSend) >= e.minSendGap()) {
			e.flushRows(t, true)
		}
	})
	if err != nil {
		e.logf(LogWarn, "sending ledger rows to the accountant: %v", err)
		e.rows.acked(now, false)
		if e.finishing != nil {
			e.finishStep(now, false)
		}
	}
}

// finishAttempts bounds the sends Finish makes in a row that fail.
const finishAttempts = 3

// Finish is called when the host ends the VM (shutdown, or a new plugin
// configuration replacing this one). With no rows waiting it returns true:
// the VM may go. Otherwise it sends them, batch after batch without waiting
// for ticks, and returns false; done is called once every row is
// acknowledged or the accountant failed finishAttempts sends in a row (the
// rows left are logged as lost).
func (e *Engine) Finish(done func()) bool {
	if e.host.Caller == nil || e.rows.lag() == 0 || e.finishing != nil {
		return e.finishing == nil
	}
	e.finishing = done
	e.finishFailures = 0
	if e.rows.inflight == 0 {
		e.flushRows(e.host.Now(), true)
	}
	return e.finishing == nil
}

// finishStep goes on with Finish after the answer to a batch.
func (e *Engine) finishStep(now time.Time, ok bool) {
	if ok {
		e.finishFailures = 0
	} else {
		e.finishFailures++
	}
	if e.rows.lag() > 0 && e.finishFailures < finishAttempts {
		e.flushRows(now, true)
		return
	}
	if n := e.rows.lag(); n > 0 {
		e.logf(LogError, "the VM is ending with %d ledger rows the accountant did not take; they are lost", n)
		e.host.Metrics.Add(MetricRowsDropped, uint64(n))
	}
	done := e.finishing
	e.finishing = nil
	done()
}
