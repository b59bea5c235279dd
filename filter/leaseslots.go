package filter

import (
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// Concurrency under store: share with the fleet's Redis: the replica
// holds a lease of the limit's slots, and its gauge (every VM's calls in
// flight) admits up to them; a call that finds them all taken asks for one
// more. Redis never leases more slots than the amount, so the fleet never
// has more calls in flight than the amount, and one busy replica may hold
// nearly all of them. A slot stays with the replica when its call ends, for
// the next; the slots it has not needed for a while go back. A replica
// renews its slots every second; a silent one's lapse after slotTTL.

// slotTTL is how long Redis counts a replica's slots after its last
// renewal (accountant.LeaseSlots).
const slotTTL = 10 * time.Second

// slotsNoneFor is how long the fleet's "no slot free" holds before a call
// past the lease asks again (slots free as calls end, at no known time).
const slotsNoneFor = 50 * time.Millisecond

// checkSlots takes a slot of the concurrency instance in (position i at
// gate 1) on the replica's lease. It returns the refusal (nil: the call
// holds a slot) and whether the request waits for the fleet.
func (e *Engine) checkSlots(s *Stream, in *govern.Instance, i int, now time.Time, v Verdict) (*Verdict, bool) {
	key := leaseKey(kindSlots, in.CellKey())
	ns := now.UnixNano()
	if o, ok := s.wait.answered(i); ok {
		switch o {
		case leaseGot:
			// The grant raised the replica's slots by this call's: it
			// takes one under them below, as any call does. Another call
			// of the replica may have taken it between the answer and
			// now; then this one asks again (taken whatever the gauge
			// read, it ran the replica past its slots, the fleet past its
			// amount).
		case leaseRefused:
			return e.refuseSlots(s, in, now, v, s.wait.spent), false
		default:
			return e.slotsShare(s, in, now, v, s.wait.why), false
		}
	}
	c, _, _, err := e.leaseGet(key, kindSlots)
	if err != nil {
		return e.uncheckable(s, in, v, "its lease cell could not be read: "+err.Error()), false
	}
	held := c.units
	if c.expires <= ns {
		held = 0 // not renewed in time: Redis no longer counts them
	}
	if held > 0 {
		taken, live, h, err := e.cells.gaugeAcquire(in.CellKey(), held, false, now, e.leaseTTL)
		if err != nil {
			return e.uncheckable(s, in, v, "its shared-data gauge could not be updated: "+err.Error()), false
		}
		if taken {
			e.tookSlot(s, in, h, live, now)
			return nil, false
		}
	}
	switch {
	case c.noneUntil > ns:
		return e.refuseSlots(s, in, now, v, c.fleetA), false
	case c.downSince != 0:
		return e.slotsShare(s, in, now, v, "the fleet store (shared Redis) has not decided since "+time.Unix(0, c.downSince).UTC().Format(time.RFC3339)), false
	}
	if e.waitLease(s, in, i, kindSlots, 1, 1, spendAsk{}, now) {
		return nil, true
	}
	return e.slotsShare(s, in, now, v, s.wait.why), false
}

// takeSlot takes one lease on in's gauge under limit.
func (e *Engine) takeSlot(s *Stream, in *govern.Instance, limit int64, now time.Time, v Verdict) *Verdict {
	taken, live, h, err := e.cells.gaugeAcquire(in.CellKey(), limit, false, now, e.leaseTTL)
	if err != nil {
		return e.uncheckable(s, in, v, "its shared-data gauge could not be updated: "+err.Error())
	}
	if !taken {
		return e.refuseSlots(s, in, now, v, live)
	}
	e.tookSlot(s, in, h, live, now)
	return nil
}

func (e *Engine) tookSlot(s *Stream, in *govern.Instance, h *gaugeHold, live int64, now time.Time) {
	s.leases = append(s.leases, lease{hold: h})
	if len(in.Limit.Thresholds) > 0 {
		e.gateAlerts(in, live, live+1, in.Amount, now)
	}
}

// refuseSlots answers a concurrency instance whose fleet has no slot free
// (observed: the calls in flight it knows of) with its 429, unless its
// posture admits it.
func (e *Engine) refuseSlots(s *Stream, in *govern.Instance, now time.Time, v Verdict, observed int64) *Verdict {
	if !e.over(s, in) {
		return nil
	}
	r := wire.Refusal{
		RequestID: s.id,
		LimitID:   in.Limit.ID,
		LimitType: wire.Concurrency,
		Node:      in.Node,
		Observed:  min(max(observed, 0), in.Amount),
		Limit:     in.Amount,
	}
	return e.refuse(s, v, &r, in)
}

// slotsShare takes a slot while the fleet does not decide (why): fail:
// closed with enforce: hard answers 503; otherwise the replica admits up to
// the slots it holds, or its share of the amount over the replicas it last
// knew when that is more, and says suspended.
func (e *Engine) slotsShare(s *Stream, in *govern.Instance, now time.Time, v Verdict, why string) *Verdict {
	if reply := e.uncheckable(s, in, v, why); reply != nil {
		return reply
	}
	c, _, _, err := e.leaseGet(leaseKey(kindSlots, in.CellKey()), kindSlots)
	if err != nil {
		return e.uncheckable(s, in, v, "its lease cell could not be read: "+err.Error())
	}
	held := c.units
	if c.expires <= now.UnixNano() {
		held = 0
	}
	limit := max(held, replicaShare(in.Amount, max(c.replicas, int64(e.replicas), 1)))
	return e.takeSlot(s, in, limit, now, v)
}

// slotsGranted takes a slots lease's answer: the replica's slots are what
// Redis says it holds now; the waiters, in order, take the slots granted,
// or hear no.
func (e *Engine) slotsGranted(a *leaseAsk, l syncwire.Lease, ans leaseAnswer, waiters []leaseWaiter, now time.Time) {
	g := ans.grant
	ns := now.UnixNano()
	_, err := e.leaseUpdate(a.key, kindSlots, func(c *leaseCell) bool {
		c.units = g.Mine
		c.expires = a.sent.Add(slotTTL - leaseMargin).UnixNano()
		if g.Granted > 0 {
			c.lotAt = ns
		}
		c.fleetA, c.seenAt = g.Others, ns
		c.answered(a, ans)
		if !g.Allowed {
			c.noneUntil = ns + int64(slotsNoneFor)
		}
		return true
	})
	left := g.Granted
	for i := range waiters {
		w := &waiters[i]
		if !w.live(a.key) {
			continue
		}
		switch {
		case err != nil:
			w.s.wait.outcome, w.s.wait.why = leaseDown, "its lease cell could not be updated: "+err.Error()
		case left >= w.need:
			left -= w.need
			w.s.wait.outcome = leaseGot
		case !g.Allowed:
			w.s.wait.outcome, w.s.wait.spent = leaseRefused, g.Others+g.Mine
		}
	}
}
