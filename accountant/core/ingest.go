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
	// recorded it is durable, so the caller waits for that tag as well.
	WaitTag uint64
	// Alerts are the threshold crossings this batch caused.
	Alerts []Alert
	// MaxEnd is the latest end time among the rows folded (fold lag).
	MaxEnd time.Time
}

// Ingest records a batch at instant now. Each accepted row is priced in
// place (its Cost set) when it carries no cost, and remembered under tag,
// the sequence number of the durable commit the caller will write it in.
// Refused rows are recorded but not folded. Ingest is Prepare followed by
// IngestPrepared.
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

// Prepared is what Prepare worked out for one row.
type Prepared struct {
	key requestKey
	err error
}

// Prepare does the part of ingest that needs no state, so callers can run
// it outside whatever serialises the Core: it validates each row, packs its
// request id, and prices the row in place when it carries no cost. It reads
// only the immutable catalog and is safe to call concurrently with any
// other method. A refused row was never forwarded: it costs nothing and is
// left unpriced (its cost stays null) rather than reported as UNPRICED. The
// result is appended to out.
func (c *Core) Prepare(rows []ledger.Row, out []Prepared) []Prepared {
	for i := range rows {
		r := &rows[i]
		k, err := validate(r)
		if err == nil && r.Cost == nil && r.Decision != ledger.Refused {
			p := c.opts.Pricing.PriceRow(r)
			r.Cost = &ledger.Cost{Nanos: p.Nanos, Unpriced: p.Unpriced, Estimated: r.Estimated.Input || r.Estimated.Output}
		}
		out = append(out, Prepared{key: k, err: err})
	}
	return out
}

// IngestPrepared is Ingest for rows that went through Prepare.
func (c *Core) IngestPrepared(now time.Time, rows []ledger.Row, prep []Prepared, tag uint64) Result {
	return c.ingest(now, rows, prep, tag, true)
}

func (c *Core) ingest(now time.Time, rows []ledger.Row, prep []Prepared, tag uint64, live bool) Result {
	c.advance(now)
	res := Result{Outcomes: make([]Outcome, len(rows))}
	c.deltas, c.targets, c.values = c.deltas[:0], c.targets[:0], c.values[:0]
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
			continue
		}
		c.dedup.insert(k, r.End, tag)
		res.Outcomes[i] = Accepted
		res.Accepted++
		if r.Cost != nil && r.Cost.Unpriced {
			res.Unpriced++
		}
		if r.Decision == ledger.Refused {
			c.stats.Refused++
			continue
		}
		c.fold(r)
		if r.End.After(res.MaxEnd) {
			res.MaxEnd = r.End
		}
	}
	c.stats.Accepted += int64(res.Accepted)
	c.stats.Duplicates += int64(res.Duplicates)
	c.stats.Rejected += int64(res.Rejected)
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
	}
	switch r.Decision {
	case ledger.Admitted, ledger.Refused, ledger.ShadowRefused, ledger.SoftBreach:
	default:
		return k, fmt.Errorf("decision %q is not one of admitted, refused, shadow_refused, soft_breach", truncate(string(r.Decision)))
	}
	if r.Cost != nil && r.Cost.Nanos < 0 {
		return k, fmt.Errorf("cost.nanos %d is negative", r.Cost.Nanos)
	}
	return k, nil
}

// Err is the reason Prepare found the row unreadable, or nil.
func (p Prepared) Err() error { return p.err }

// Reason says why the row at Index (0-based, in the batch given) was
// rejected; Message names its request id when it has a readable one.
type Reason struct {
	Index   int
	Message string
}
