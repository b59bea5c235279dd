package filter

import (
	"time"

	"github.com/tokentriage/tokentriage/shared/jsontok"
	"github.com/tokentriage/tokentriage/shared/jsontok/jv"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// Ledger rows wait in a per-VM queue until the accountant acknowledges
// them. Rows are idempotent by request id (and kind), so a batch whose
// answer was lost is simply sent again. Nothing one row does can jam the
// queue (see RATIONALE.md, "Why can no row jam the ledger queue?"):
//
//   - every row is held to ledger.MaxRowBytes (ledger.Row.Bound), and a
//     batch to batchRows rows and batchBytes bytes;
//   - a batch the accountant (or anything between) refuses whole as too
//     large or unreadable (400, 413) is split in halves and sent again at
//     once; a lone row refused whole twice is quarantined: logged with its
//     request id, counted, and dropped from the queue, so the rows behind
//     it go on;
//   - past maxUnacked rows or maxQueueBytes bytes, rows are folded into
//     per-group totals (overflow.go) that reach the accountant as summary
//     rows once there is room, so nothing served goes uncounted; only a
//     row that names its request to the fleet (holds, reconciles) is
//     queued past those bounds, up to twice them, and only past that, or
//     when the totals are full too, is a row dropped;
//   - a queue whose oldest row has waited stuckAfter makes the host's
//     LedgerSettled limits uncheckable (tee.go), and says so in their
//     429's bound.
//
// Batches are sized by time and count: once batchMin rows wait, the
// oldest waits up to batchWait for others to join it (the next row to end
// after that, or an answer, sends them all); fewer leave with the tick; a
// full batch leaves at once; at most one batch is in flight (see
// RATIONALE.md, "Why does a row leave as its request ends?").
const (
	maxUnacked    = 4096
	maxQueueBytes = 4 << 20
	batchRows     = 256
	batchBytes    = 512 << 10
	maxBackoff    = 10 * time.Second
	ingestTimout  = 5 * time.Second
	// stuckAfter is how long the oldest unacknowledged row may wait
	// before the host's spend counters are distrusted: the snapshot's own
	// trust window.
	stuckAfter = snapshotTrust
	// quarantineAfter is how many times a lone row may be refused whole
	// before it is quarantined.
	quarantineAfter = 2
)

// rowQueue keeps the encoded rows back to back in one buffer, each a JSON
// line ending in '\n', so that a batch is a slice of it rather than a copy
// (a 256-row batch is about 150 KB, and the guest copies memory slowly) and
// a row is encoded straight into place.
type rowQueue struct {
	data []byte  // rows[0:] encoded back to back
	ends []int   // ends[i] is where row i ends in data
	at   []int64 // at[i] is when row i was queued (unix ns)
	reqs []int32 // reqs[i] is the requests row i stands for (ledger.Row.Requests)
	head int     // rows head and later are unacknowledged
	// inflight: rows head to head+inflight are in the batch in flight.
	inflight int
	// pending is the requests the unacknowledged rows stand for.
	pending int64
	dropped uint64 // rows dropped since start (both bounds and the totals full)
	// droppedAt is when the last row was dropped (unix ns), 0 never.
	droppedAt int64
	sent      uint64
	nextSend  time.Time
	backoff   time.Duration
	lastSend  time.Time // when the last batch left
	// limit is the most rows the next batch takes: batchRows, halved
	// after a batch was refused whole, doubled back after each success.
	limit int
	// refusedLone counts the whole refusals of the lone row at head.
	refusedLone int
}

// lag is the number of rows not yet acknowledged.
func (q *rowQueue) lag() int { return len(q.ends) - q.head }

// start is where row i begins in data.
func (q *rowQueue) start(i int) int {
	if i == 0 {
		return 0
	}
	return q.ends[i-1]
}

// bytes is the size of the unacknowledged rows.
func (q *rowQueue) bytes() int { return len(q.data) - q.start(q.head) }

// room reports whether a row of n more bytes fits under the bounds (soft:
// maxUnacked rows and maxQueueBytes; hard: twice those).
func (q *rowQueue) room(n int, hard bool) bool {
	rows, size := maxUnacked, maxQueueBytes
	if hard {
		rows, size = 2*rows, 2*size
	}
	return q.lag() < rows && q.bytes()+n <= size
}

// push appends the row encoded at data[from:] (its newline included),
// queued at now and standing for reqs requests.
func (q *rowQueue) push(now time.Time, reqs int64) {
	q.ends = append(q.ends, len(q.data))
	q.at = append(q.at, now.UnixNano())
	q.reqs = append(q.reqs, int32(min(reqs, 1<<31-1)))
	q.pending += reqs
}

// unsent is the number of rows queued and not in the batch in flight.
func (q *rowQueue) unsent() int { return q.lag() - q.inflight }

// oldestUnsent is when the first row not in flight was queued (unix ns),
// 0 when there is none.
func (q *rowQueue) oldestUnsent() int64 {
	if q.unsent() == 0 {
		return 0
	}
	return q.at[q.head+q.inflight]
}

// oldest is when the first unacknowledged row was queued (unix ns), 0
// when there is none.
func (q *rowQueue) oldest() int64 {
	if q.lag() == 0 {
		return 0
	}
	return q.at[q.head]
}

// full reports whether the unsent rows make a whole batch.
func (q *rowQueue) full() bool {
	return q.unsent() >= q.batchLimit() || len(q.data)-q.start(q.head+q.inflight) >= batchBytes
}

func (q *rowQueue) batchLimit() int {
	if q.limit <= 0 {
		return batchRows
	}
	return q.limit
}

// batch returns the next batch to send, or nil when nothing should be sent
// now (empty, a batch in flight, or backing off). It is a slice of the
// queue's buffer: the host copies it when the call is made.
func (q *rowQueue) batch(now time.Time, force bool) []byte {
	if q.inflight > 0 || q.lag() == 0 || (!force && now.Before(q.nextSend)) {
		return nil
	}
	from := q.start(q.head)
	n := 1 // a row is at most ledger.MaxRowBytes, under batchBytes
	for n < min(q.lag(), q.batchLimit()) && q.ends[q.head+n]-from <= batchBytes {
		n++
	}
	q.inflight = n
	return q.data[from:q.ends[q.head+n-1]]
}

// acked records that the batch in flight was taken.
func (q *rowQueue) acked() {
	q.sent += uint64(q.inflight)
	q.drop(q.inflight)
	q.inflight = 0
	q.backoff = 0
	q.nextSend = time.Time{}
	q.refusedLone = 0
	q.limit = min(2*q.batchLimit(), batchRows)
}

// failed records that the batch in flight failed (it is sent again after a
// backoff).
func (q *rowQueue) failed(now time.Time) {
	q.inflight = 0
	q.backoff = min(max(2*q.backoff, 500*time.Millisecond), maxBackoff)
	q.nextSend = now.Add(q.backoff)
}

// refused records that the batch in flight was refused whole; it reports
// whether its lone row is to be quarantined (refused quarantineAfter
// times). A batch of several rows is split: the next takes half as many,
// at once.
func (q *rowQueue) refused(now time.Time) (quarantine bool) {
	n := q.inflight
	q.inflight = 0
	if n > 1 {
		q.limit = max(n/2, 1)
		q.nextSend = time.Time{}
		return false
	}
	q.limit = 1
	q.refusedLone++
	if q.refusedLone >= quarantineAfter {
		q.refusedLone = 0
		return true
	}
	q.backoff = min(max(2*q.backoff, 500*time.Millisecond), maxBackoff)
	q.nextSend = now.Add(q.backoff)
	return false
}

// headRow is the encoded row at head, without its newline.
func (q *rowQueue) headRow() []byte {
	return q.data[q.start(q.head) : q.ends[q.head]-1]
}

// drop forgets the first n unacknowledged rows (taken, or quarantined).
func (q *rowQueue) drop(n int) {
	for i := q.head; i < q.head+n; i++ {
		q.pending -= int64(q.reqs[i])
	}
	q.head += n
	// Compact once half the rows are spent: the unsent tail moves to the
	// front (usually a few rows), and the buffer keeps its capacity.
	if q.head > 0 && q.head >= len(q.ends)/2 {
		off := q.start(q.head)
		m := copy(q.data, q.data[off:])
		q.data = q.data[:m]
		m = copy(q.ends, q.ends[q.head:])
		q.ends = q.ends[:m]
		for i := range q.ends {
			q.ends[i] -= off
		}
		q.at = q.at[:copy(q.at, q.at[q.head:])]
		q.reqs = q.reqs[:copy(q.reqs, q.reqs[q.head:])]
		q.head = 0
	}
}

// enqueue queues a finished request's row (or a start row, a summary):
// bounded, encoded in place, folded into the totals when the queue is
// full. It reports whether the row was queued as a row of its own.
func (e *Engine) enqueue(r *ledger.Row, now time.Time) bool {
	q := &e.rows
	from := len(q.data)
	if boundCaller(r) {
		e.host.Metrics.Add(MetricRowsCut, 1)
		e.cutRows++
	}
	q.data = append(r.AppendJSON(q.data), '\n')
	if n := len(q.data) - from; n > ledger.MaxRowBytes+1 {
		// Still too long: lists from a plan of thousands of limits on one
		// chain. The lists go; the row counts the request all the same.
		r.Shadow, r.Breached, r.Suspended = nil, nil, nil
		r.Cut = append(r.Cut, "shadow", "breached", "suspended")
		q.data = append(r.AppendJSON(q.data[:from]), '\n')
	}
	n := len(q.data) - from
	foldable := r.Kind != ledger.KindStart && len(r.Holds) == 0 && len(r.Reconcile) == 0
	// While totals wait, rows join them (the totals leave first, as room
	// comes back), unless the accountant no longer reads summaries.
	if q.room(n, false) && (e.totals.len() == 0 || !foldable || !e.kinds.summary) {
		q.push(now, r.Requests())
		return true
	}
	q.data = q.data[:from]
	if foldable && e.kinds.summary && e.totals.add(r, now, e.totalsCap()) {
		e.host.Metrics.Add(MetricRowsFolded, 1)
		e.foldedRows++
		return false
	}
	if !foldable && r.Kind != ledger.KindStart && q.room(n, true) {
		q.data = append(r.AppendJSON(q.data), '\n')
		q.push(now, r.Requests())
		return true
	}
	if r.Kind == ledger.KindStart {
		return false // its end, or the totals, will count the call
	}
	q.dropped++
	q.droppedAt = now.UnixNano()
	e.host.Metrics.Add(MetricRowsDropped, 1)
	return false
}

// boundCaller cuts the members of r that come from the caller or the
// upstream (the key id, the path, the provider, the models) to
// ledger.MaxFieldBytes, naming them in Cut, and reports whether it cut
// any. The accountant bounds every member of every row it takes
// (ledger.Row.Bound); the filter bounds what can be long here, in less
// code.
func boundCaller(r *ledger.Row) bool {
	cut := false
	for i, p := range [...]*string{&r.KID, &r.Endpoint, &r.Provider, &r.Model, &r.Served} {
		if len(*p) > ledger.MaxFieldBytes {
			*p = ledger.CutField(*p)
			r.Cut = append(r.Cut, callerMembers[i])
			cut = true
		}
	}
	return cut
}

var callerMembers = [...]string{"kid", "endpoint", "provider", "model", "model_served"}

// totalsCap is how many groups the overflow totals may hold.
func (e *Engine) totalsCap() int { return maxTotals }

// drainTotals moves the overflow totals into the queue as summary rows
// while there is room (after an answer, and on tick).
func (e *Engine) drainTotals(now time.Time) {
	for e.totals.len() > 0 && e.rows.room(ledger.MaxRowBytes+1, false) {
		e.queueTotal(e.totals.pop(), now)
	}
}

// lagRequests is the requests this VM holds that the accountant has not
// acknowledged: its queued rows (a summary counted as its requests) and
// its totals (the bound's tee_lag_rows, and tokentriage.ledger.rows_queued).
func (e *Engine) lagRequests() int64 { return e.rows.pending + e.totals.reqs + e.unauth.reqs }

// oldestUnacked is when the oldest request this VM holds unacknowledged
// ended (unix ns), 0 when none.
func (e *Engine) oldestUnacked() int64 {
	o := e.rows.oldest()
	for _, t := range [...]int64{e.totals.oldest(), e.unauth.oldest()} {
		if t != 0 && (o == 0 || t < o) {
			o = t
		}
	}
	return o
}

// setQueued publishes the live lag in tokentriage.ledger.rows_queued.
func (e *Engine) setQueued() {
	if v := e.lagRequests(); v != e.queuedShown {
		e.host.Metrics.Set(GaugeRowsQueued, v)
		e.queuedShown = v
	}
}

// flushRows sends the next batch to the accountant when one is due (the
// tick, and the answer to a batch).
func (e *Engine) flushRows(now time.Time, force bool) {
	if e.host.Caller == nil {
		return
	}
	e.sendRows(now, force, e.host.Caller.Call)
}

// batchWait is how long a queued row waits for others once batchMin rows
// wait: a tenth of the flush interval (10 ms in dev, 50 ms by default), at
// least 5 ms.
func (e *Engine) batchWait() time.Duration { return max(e.flushEvery/10, 5*time.Millisecond) }

// batchMin is the fewest rows that leave before the tick: fewer wait for
// it (one flush interval at most). A batch costs the same whatever it
// carries (the callout, the accountant's ingest and its fsync, about half
// a millisecond of CPU), so at a low rate rows that left one or two a
// batch cost several times what they cost under load; waiting for
// batchMin rows or the tick makes a batch carry about as many rows at 50
// requests a second as at 1,000, and what a crash can lose stays within
// batchMin rows a VM or one flush interval of traffic, the bound the tick
// already set when traffic stops.
const batchMin = 8

// due reports whether the unsent rows should leave now: a whole batch
// waits, or batchMin rows wait and the oldest has waited batchWait.
func (e *Engine) due(now time.Time) bool {
	if e.rows.unsent() == 0 {
		return false
	}
	return e.rows.full() || e.rows.unsent() >= batchMin && now.UnixNano()-e.rows.oldestUnsent() >= int64(e.batchWait())
}

// sendRowsNow sends the queued rows from the stream that just queued one,
// when they are due (sendRows says when) and no batch is in flight or being
// backed off; otherwise the answer to the batch in flight, a later row, or
// the tick sends them. The call is answered on the plugin context: the
// stream ends right after.
func (e *Engine) sendRowsNow(now time.Time) {
	pc, ok := e.host.Caller.(PluginCaller)
	if e.rows.inflight > 0 || now.Before(e.rows.nextSend) || !ok || e.finishing != nil || !e.due(now) {
		e.setQueued() // nothing leaves now: the gauge says so at once
		return
	}
	e.sendRows(now, false, pc.CallForPlugin)
}

type callFunc func(method, path string, headers [][2]string, body []byte, timeout time.Duration, cb func(int, []byte)) error

// sendRows sends the next batch through call when one is due. The calls
// in flight are the open calls' start rows first (startrow.go).
func (e *Engine) sendRows(now time.Time, force bool, call callFunc) {
	if e.rows.inflight == 0 && e.queueStarts(now) && e.rows.lag() == 0 {
		e.askKinds(now, call)
	}
	body := e.rows.batch(now, force)
	if body == nil {
		e.setQueued()
		return
	}
	n := e.rows.inflight
	e.rows.lastSend = now
	e.setQueued()
	err := call("POST", syncwire.IngestPath, e.ingestHeaders, body, ingestTimout, func(status int, resp []byte) {
		t := e.host.Now()
		ok := e.answered(t, n, status, resp)
		if e.finishing != nil {
			e.finishStep(t, ok)
			return
		}
		if !ok {
			return
		}
		// Rows that arrived while this batch was out leave now, from this
		// callback (the plugin context), when they are due: a whole batch
		// back to back (a backlog drains within one tick), else once the
		// oldest has waited batchWait.
		if e.due(t) {
			e.flushRows(t, true)
		}
	})
	if err != nil {
		e.logf(LogWarn, "sending ledger rows to the accountant: %v", err)
		e.rows.failed(now)
		if e.finishing != nil {
			e.finishStep(now, false)
		}
	}
}

// answered handles the accountant's answer to a batch of n rows and
// reports whether the queue moved on (the batch was taken, or a row of it
// quarantined).
func (e *Engine) answered(now time.Time, n, status int, resp []byte) bool {
	switch {
	case status == 200:
		if r := jv.GetBytes(resp, "rejected"); r.Int() > 0 {
			e.logf(LogWarn, "the accountant quarantined %d of %d ledger rows it cannot accept (its quarantine.jsonl keeps them): %s", r.Int(), n, jv.GetBytes(resp, "errors").Raw)
		}
		e.kinds.learn(resp)
		e.host.Metrics.Add(MetricRowsSent, uint64(n))
		e.rows.acked()
		e.drainTotals(now)
		e.setQueued()
		return true
	case status == 400 || status == 413:
		// Refused whole: too large or unreadable for the accountant, or
		// for a proxy between them. Smaller batches get through; a lone
		// row that does not is quarantined.
		if n > 1 {
			e.logf(LogWarn, "the accountant refused a batch of %d ledger rows whole (status %d: %s); sending them in batches of %d", n, status, excerptBytes(resp), max(n/2, 1))
		}
		if !e.rows.refused(now) {
			if n > 1 && e.finishing == nil {
				e.flushRows(now, true)
			}
			return n > 1
		}
		row := e.rows.headRow()
		id := jv.GetBytes(row, "request_id").String()
		e.logf(LogError, "ledger: quarantined row %s: the accountant refused it alone %d times (status %d: %s); it is dropped from the queue so the rows behind it go on. The row: %s",
			id, quarantineAfter, status, excerptBytes(resp), excerptBytes(row))
		e.host.Metrics.Add(MetricRowsQuarantined, 1)
		e.rows.drop(1)
		e.rows.limit = batchRows
		e.setQueued()
		if e.finishing == nil {
			e.flushRows(now, true)
		}
		return true
	default:
		e.logf(LogWarn, "sending %d ledger rows to the accountant failed (status %d); retrying", n, status)
		e.rows.failed(now)
		return false
	}
}

// excerptBytes quotes at most 512 bytes of b for a log line.
func excerptBytes(b []byte) string {
	if len(b) > 512 {
		return string(jsontok.AppendString(nil, string(b[:512]))) + "… (" + itoa(int64(len(b))) + " bytes)"
	}
	return string(jsontok.AppendString(nil, string(b)))
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
	now := e.host.Now()
	e.queueUnauth(now, true)
	e.drainTotals(now)
	if e.host.Caller != nil && e.finishing == nil {
		// What this VM's leases hold goes back for the other replicas.
		e.renewLeases(e.host.Now(), true)
	}
	if e.host.Caller == nil || e.rows.lag() == 0 || e.finishing != nil {
		return e.finishing == nil
	}
	e.finishing = done
	e.finishFailures = 0
	if e.rows.inflight == 0 {
		e.flushRows(now, true)
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
	e.drainTotals(now)
	if e.rows.lag() > 0 && e.finishFailures < finishAttempts {
		e.flushRows(now, true)
		return
	}
	if n := e.lagRequests(); n > 0 {
		e.logf(LogError, "the VM is ending with %d ledger rows the accountant did not take; they are lost", n)
		e.host.Metrics.Add(MetricRowsDropped, uint64(n))
	}
	done := e.finishing
	e.finishing = nil
	done()
}
