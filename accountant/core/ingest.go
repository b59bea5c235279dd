package core

import (
	"errors"
	"fmt"
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// Outcome is what happened to one row of a batch.
type Outcome uint8

const (
	// Accepted: newly recorded (the caller writes it to the ledger).
	Accepted Outcome = iota + 1
	// Duplicate: a row with this request id was recorded before.
	Duplicate
	// Rejected: unreadable or too old to deduplicate; Reason says why.
	Rejected
)

// Result is the outcome of one batch.
type Result struct {
	// Outcomes has one entry per row, in order.
	Outcomes []Outcome
	// Reasons has one entry per Rejected row, in order.
	Reasons []Reason
	// Accepted, Duplicates, Rejected count the outcomes.
	Accepted, Duplicates, Rejected int
	// Unpriced counts the accepted rows whose model has no price.
	Unpriced int
	// WaitTag is the largest tag among the rows this batch found already
	// recorded: a duplicate is acknowledged only once the batch that
	// recorded it is durable, so the caller waits for that tag as well (and
	// answers the batch as failed if that commit failed).
	WaitTag uint64
	// Alerts are the threshold crossings this batch caused.
	Alerts []Alert
	// MaxEnd is the latest end time among the rows folded (fold lag).
	MaxEnd time.Time
	// Redated counts the accepted rows whose end lay too far from now and
	// was re-dated (redate.go); Skew is the largest such distance (signed:
	// positive for an end ahead of the clock) and SkewReplica the filter
	// replica of that row.
	Redated     int
	Skew        time.Duration
	SkewReplica string
	// Requests is what the rows Commit recorded stand for: a summary its
	// count, a start none, a late end none more than the estimate it
	// replaces (ledger.Row.Requests).
	Requests int64
	// Replaced lists the rows (by index) whose Replaced Admit set: ends
	// that came after the accountant closed their call at its estimate.
	// The caller encodes their lines again before writing them.
	Replaced []int
}

// Ingest records a batch at instant now whose rows are durable already
// (tests, replay): Admit followed by Commit. Each accepted row is priced in
// place (its Cost set) when it carries no cost. Refused rows are recorded
// but not folded.
func (c *Core) Ingest(now time.Time, rows []ledger.Row, tag uint64) Result {
	return c.ingest(now, rows, c.Prepare(rows, nil), tag, true)
}

// Restore feeds rows read back from the ledger at start: like Ingest with
// tag 0 (already durable), except that rows before the dedup horizon are
// skipped silently and alerts are marked as raised without being returned
// (they were raised before the restart).
func (c *Core) Restore(now time.Time, rows []ledger.Row) Result {
	return c.ingest(now, rows, c.Prepare(rows, nil), 0, false)
}

func (c *Core) ingest(now time.Time, rows []ledger.Row, prep []Prepared, tag uint64, live bool) Result {
	res := c.admit(now, rows, prep, tag, live)
	f := c.commit(now, tag, live)
	res.Alerts, res.MaxEnd, res.Unpriced = f.Alerts, f.MaxEnd, f.Unpriced
	return res
}

// Prepared is what Prepare worked out for one row.
type Prepared struct {
	key requestKey
	err error
}

// Prepare does the part of ingest that needs no state, so callers can run
// it outside whatever serialises the Core: it validates each row, packs its
// request id, and prices the row in place when it carries no cost. It reads
// only the immutable catalog and is safe to call concurrently with any
// other method. A refused row was never forwarded, and a passthrough row
// was forwarded ungoverned: either is left unpriced (its cost stays null)
// rather than reported as UNPRICED. The result is appended to out.
func (c *Core) Prepare(rows []ledger.Row, out []Prepared) []Prepared {
	for i := range rows {
		r := &rows[i]
		k, err := validate(r)
		if err == nil && r.Cost == nil && r.Decision.Folded() && r.Kind != ledger.KindStart {
			p := c.opts.Pricing.PriceRow(r)
			r.Cost = &ledger.Cost{Nanos: p.Nanos, Unpriced: p.Unpriced, Estimated: r.Estimated.Input || r.Estimated.Output}
		}
		out = append(out, Prepared{key: k, err: err})
	}
	return out
}

// pendingBatch is the accepted rows of a batch admitted under a tag, held
// until the caller reports the commit that writes them durable (Commit)
// or failed (Abort).
type pendingBatch struct {
	rows []*ledger.Row
	keys []requestKey
}

// Admit is the first half of a live ingest, for rows that went through
// Prepare and that the caller is about to write under tag, the sequence
// number of its durable commit. It deduplicates the batch (an accepted
// row's request id is taken at once, so a concurrent retry of it waits for
// tag) and holds the accepted rows back from the counters: they are folded
// by Commit(tag) once the commit is durable, or forgotten by Abort(tag) if
// it failed, so the counters never count a row the ledger does not hold.
// The caller keeps rows alive until then. The Result's Alerts, MaxEnd and
// Unpriced are Commit's.
func (c *Core) Admit(now time.Time, rows []ledger.Row, prep []Prepared, tag uint64) Result {
	return c.admit(now, rows, prep, tag, true)
}

// Commit folds the rows admitted under tag, whose commit is now durable,
// into the counters, and returns the alerts they raise (with Accepted, the
// rows recorded, Unpriced and MaxEnd filled in).
func (c *Core) Commit(now time.Time, tag uint64) Result {
	return c.commit(now, tag, true)
}

// Abort forgets the rows admitted under tag, whose commit failed: their
// request ids are free again, so the sender's retry is recorded afresh.
func (c *Core) Abort(tag uint64) {
	p := c.admitted[tag]
	if p == nil {
		return
	}
	delete(c.admitted, tag)
	for _, k := range p.keys {
		c.dedup.forget(k, tag)
	}
}

// Pending is the number of batches admitted and neither committed nor
// aborted.
func (c *Core) Pending() int { return len(c.admitted) }

func (c *Core) admit(now time.Time, rows []ledger.Row, prep []Prepared, tag uint64, live bool) Result {
	c.advance(now)
	res := Result{Outcomes: make([]Outcome, len(rows))}
	var p *pendingBatch
	for i := range rows {
		r := &rows[i]
		k, err := prep[i].key, prep[i].err
		if err == nil && c.dedup.tooOld(r.End) {
			if !live {
				res.Outcomes[i] = Rejected
				res.Rejected++
				continue
			}
			err = fmt.Errorf("ended %s, before the deduplication horizon %s: a row that old cannot be checked for duplicates, so it is not recorded",
				r.End.UTC().Format(time.RFC3339), time.Unix(c.dedup.horizon*3600, 0).UTC().Format(time.RFC3339))
		}
		if err != nil {
			res.Outcomes[i] = Rejected
			res.Rejected++
			msg := err.Error()
			if !errors.Is(err, errRequestID) {
				msg = "request_id " + truncate(r.RequestID) + ": " + msg
			}
			res.Reasons = append(res.Reasons, Reason{Index: i, Message: msg})
			continue
		}
		if t, dup := c.dedup.lookup(k); dup {
			res.Outcomes[i] = Duplicate
			res.Duplicates++
			res.WaitTag = max(res.WaitTag, t)
			if r.Kind == ledger.KindStart && live {
				c.renew(now, r, k) // sent again: the call is alive
			}
			continue
		}
		if live {
			if skew, ok := c.redate(now, r); ok {
				res.Redated++
				c.stats.Redated++
				if abs(skew) > abs(res.Skew) {
					res.Skew, res.SkewReplica = skew, r.Replica
				}
			}
		}
		c.dedup.insert(k, r.End, tag)
		res.Outcomes[i] = Accepted
		res.Accepted++
		if r.Kind != ledger.KindStart && c.noteEnd(r, k) {
			res.Replaced = append(res.Replaced, i)
		}
		if p == nil {
			if p = c.admitted[tag]; p == nil {
				p = &pendingBatch{}
				c.admitted[tag] = p
			}
		}
		p.rows = append(p.rows, r)
		p.keys = append(p.keys, k)
	}
	c.stats.Duplicates += int64(res.Duplicates)
	c.stats.Rejected += int64(res.Rejected)
	return res
}

func (c *Core) commit(now time.Time, tag uint64, live bool) Result {
	c.advance(now)
	var res Result
	p := c.admitted[tag]
	if p == nil {
		return res
	}
	delete(c.admitted, tag)
	c.deltas, c.targets, c.values = c.deltas[:0], c.targets[:0], c.values[:0]
	for i, r := range p.rows {
		res.Accepted++
		res.Requests += r.Requests()
		if r.Replaced != nil && r.Kind == ledger.KindEnd {
			res.Requests--
		}
		switch r.Kind {
		case ledger.KindStart:
			c.stats.Starts++
			c.openStart(now, r, p.keys[i])
			continue // counted by its end, or its close
		case ledger.KindClose:
			c.stats.Closes++
			c.noteClose(r, p.keys[i])
		case ledger.KindEnd:
			if r.Replaced != nil {
				delete(c.estimated, p.keys[i])
			}
		}
		if r.Cost != nil && r.Cost.Unpriced {
			res.Unpriced++
		}
		switch r.Decision {
		case ledger.Refused:
			c.stats.Refused++
			continue
		case ledger.Passthrough:
			// Counted by quota_requests, as the filter checks it; free
			// calls count nothing.
			c.stats.Passthrough++
			if r.Free {
				continue
			}
		}
		if r.Replaced != nil && r.Kind == ledger.KindEnd {
			c.unfold(r)
		}
		if upstreamRefused(r) {
			// The provider refused it and nothing was spent: no counter
			// (and no aggregate) is made for it, so a storm of calls to
			// made-up models leaves nothing behind.
			c.stats.UpstreamRefused++
			continue
		}
		c.fold(r)
		if r.End.After(res.MaxEnd) {
			res.MaxEnd = r.End
		}
	}
	c.stats.Accepted += int64(res.Accepted)
	c.stats.Unpriced += int64(res.Unpriced)
	if len(c.deltas) > 0 {
		var err error
		c.values, err = c.opts.Store.Add(c.ctx, c.deltas, c.values)
		if err != nil {
			// The aggregates hold the batch; the next tick rebuilds the
			// store from them.
			c.storeErr = err
		} else {
			c.markChanged(now)
			res.Alerts = c.checkThresholds(now, live)
		}
	}
	return res
}

// upstreamRefused reports whether a forwarded row is one the upstream
// refused (a 4xx or 5xx) without spending anything: no token counted, no
// cost.
func upstreamRefused(r *ledger.Row) bool {
	u := r.Usage
	return r.Status >= 400 && u.Input == 0 && u.Output == 0 && u.Total == 0 && u.CachedInput == 0 && u.Reasoning == 0 &&
		(r.Cost == nil || r.Cost.Nanos == 0)
}

// validate checks what the fold relies on and packs the request id.
func validate(r *ledger.Row) (requestKey, error) {
	k, err := parseRequestID(r.RequestID)
	if err != nil {
		return k, err
	}
	switch {
	case r.End.IsZero():
		return k, fmt.Errorf("end is missing; the fold needs the row's end time to pick its period")
	case !r.Start.IsZero() && r.Start.After(r.End):
		return k, fmt.Errorf("start %s is after end %s", r.Start.UTC().Format(time.RFC3339Nano), r.End.UTC().Format(time.RFC3339Nano))
	case r.Usage.Input < 0 || r.Usage.Output < 0 || r.Usage.CachedInput < 0 || r.Usage.Reasoning < 0 || r.Usage.Total < 0:
		return k, fmt.Errorf("usage has a negative token count")
	case !r.Kind.Known():
		return k, fmt.Errorf("kind %q is not one of start, summary, close", truncate(string(r.Kind)))
	case r.Count < 0 || r.Count > 0 && r.Kind != ledger.KindSummary:
		return k, fmt.Errorf("count %d on a row that is not a summary; only a summary stands for several requests", r.Count)
	case r.Replaced != nil && (r.Kind != ledger.KindEnd || r.Replaced.End.IsZero()):
		return k, fmt.Errorf("replaced is set on a %s row, or without its end; only a finished request's row replaces an estimate", kindName(r.Kind))
	}
	k = k.as(classOf(r.Kind))
	if !r.Decision.Known() {
		return k, fmt.Errorf("decision %q is not one of admitted, refused, shadow_refused, soft_breach, passthrough", truncate(string(r.Decision)))
	}
	if r.Cost != nil && r.Cost.Nanos < 0 {
		return k, fmt.Errorf("cost.nanos %d is negative", r.Cost.Nanos)
	}
	return k, nil
}

func kindName(k ledger.Kind) string {
	if k == ledger.KindEnd {
		return "finished request's"
	}
	return string(k)
}

// Err is the reason Prepare found the row unreadable, or nil.
func (p Prepared) Err() error { return p.err }

// Reason says why the row at Index (0-based, in the batch given) was
// rejected; Message names its request id when it has a readable one.
type Reason struct {
	Index   int
	Message string
}
