package core

import (
	"sort"
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// Calls in flight. A filter sends an admitted call's start (ledger.KindStart)
// while the call runs, with the call's reserved estimate and its
// lease_ttl, and its end when it finishes. The core keeps each start
// whose end has not come as an open call. One whose end does not come
// within lease_ttl of the last word of it (its start, or the start sent
// again while it runs) had its proxy die: Expired returns its close
// (ledger.KindClose), the start at its estimate, which the server records
// like an ingested row; the call then counts at that estimate, marked
// estimated. An end that arrives after the close replaces the estimate:
// Admit sets its Replaced to the close's figures, and the fold subtracts
// those as it adds the end's, so the call is never counted twice.

// DefaultLeaseTTL closes a call whose start names no lease_ttl.
const DefaultLeaseTTL = 15 * time.Minute

// maxOpen bounds the open calls held; a start past it is recorded but not
// held open (its end still counts it).
const maxOpen = 1 << 20

// openCall is a call whose start was recorded and whose end was not.
type openCall struct {
	row      ledger.Row
	deadline time.Time // closed at its estimate from then
}

// estimate is what a close counted, kept until the dedup horizon so a late
// end can replace it.
type estimate struct {
	ledger.Replaced
	hour int64
}

// openStart holds a recorded start open (commit).
func (c *Core) openStart(now time.Time, r *ledger.Row, k requestKey) {
	if _, ended := c.dedup.lookup(k.as(keyEnd)); ended {
		return
	}
	if _, closed := c.dedup.lookup(k.as(keyClose)); closed {
		return
	}
	if len(c.open) >= maxOpen {
		c.stats.OpenDropped++
		return
	}
	c.open[k.as(keyEnd)] = &openCall{row: *r, deadline: now.Add(leaseTTL(r))}
}

// renew moves an open call's deadline: its start came again, the call is
// alive.
func (c *Core) renew(now time.Time, r *ledger.Row, k requestKey) {
	if o := c.open[k.as(keyEnd)]; o != nil {
		o.deadline = now.Add(leaseTTL(r))
	}
}

func leaseTTL(r *ledger.Row) time.Duration {
	if r.LeaseTTLMS <= 0 {
		return DefaultLeaseTTL
	}
	return time.Duration(r.LeaseTTLMS) * time.Millisecond
}

// Open is the number of calls in flight the core holds.
func (c *Core) Open() int { return len(c.open) }

// Expired returns the closes due at now: for every open call whose
// deadline passed, its start as a KindClose row ending at now, at its
// estimate, marked estimated. Nothing changes until the caller records
// them (Admit and Commit, as an ingest); a close that fails to be recorded
// is returned again by the next call.
func (c *Core) Expired(now time.Time) []ledger.Row {
	var out []ledger.Row
	for _, o := range c.open {
		if now.Before(o.deadline) {
			continue
		}
		r := o.row
		r.Kind, r.LeaseTTLMS, r.End, r.Cost, r.Status = ledger.KindClose, 0, now.UTC(), nil, 0
		r.Estimated = ledger.Estimated{Input: true, Output: true}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].RequestID < out[j].RequestID })
	return out
}

// noteEnd forgets the open call of a request whose end (or close) is
// admitted, and, for an end that comes after a close, sets what it
// replaces; it reports whether it set it.
func (c *Core) noteEnd(r *ledger.Row, k requestKey) bool {
	delete(c.open, k.as(keyEnd))
	if r.Kind != ledger.KindEnd {
		return false
	}
	e, ok := c.estimated[k.as(keyEnd)]
	if !ok || r.Replaced != nil {
		return false
	}
	p := e.Replaced
	r.Replaced = &p
	return true
}

// noteClose remembers the estimate a recorded close counted (commit).
func (c *Core) noteClose(r *ledger.Row, k requestKey) {
	c.estimated[k.as(keyEnd)] = estimate{Replaced: ledger.Replaced{End: r.End, Usage: r.Usage, Cost: r.Cost}, hour: hourOf(r.End)}
}

// pruneEstimates forgets the estimates of closes before the dedup horizon
// (an end that late is refused anyway).
func (c *Core) pruneEstimates() {
	for k, e := range c.estimated {
		if e.hour < c.dedup.horizon {
			delete(c.estimated, k)
		}
	}
}
