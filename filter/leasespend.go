package filter

import (
	"time"

	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// Reserve mode across a fleet: with the fleet's Redis, a reserve-mode
// budget or quota is decided on the replica's lease of the fleet's amount
// for the period. Redis counts the fleet's use as every accountant's
// published total plus every replica's lease not yet spent, and grants a
// lease only from what is left, so the fleet never holds more than the
// amount. A call holds its dearest cost from the lease (lowered to what
// the lease has when the fleet has no more), and settles to its cost in
// the lease's own count (leaseCell.drawn) until the accountant publishes
// the call's row, which moves the cost from the replica's lease to the
// accountant's total in one step (redisstore's publish). A replica renews
// its lease every second with what its calls in flight hold: when it goes
// silent, its unused lease stops counting after accountant.LeaseFree and
// what its calls held after lease_ttl.

// spendNoneFor is how long the fleet's "nothing left" holds before a call
// past the lease asks again: others' calls settle below their holds, and
// idle replicas give their leases back.
const spendNoneFor = time.Second

// checkLeasedSpend decides the reserve-mode instance in at position i of
// gate 2 on the replica's lease. It returns the refusal (nil: admitted,
// holding its cost) and whether the request waits for the fleet.
func (e *Engine) checkLeasedSpend(s *Stream, in *govern.Instance, i int, now time.Time, v Verdict) (*Verdict, bool) {
	l := in.Limit
	m, why := e.spendAskOf(s, in)
	key := leaseKey(kindSpend, in.CellKey())
	start := calendar.Start(l.Period.Calendar, now).Unix()
	if o, ok := s.wait.answered(i); ok {
		switch o {
		case leaseGot:
			e.heldLeased(s, in, key, start, s.wait.cost, s.wait.out, m)
			return nil, false
		case leaseRefused:
			return e.refuseSpend(s, in, now, v, s.wait.spent, heldInFlight(m, in.Amount, s.wait.spent, s.wait.inFlight), true), false
		}
		return e.spendShare(s, in, m, now, v, s.wait.why), false
	}
	if why != "" {
		return e.uncheckable(s, in, v, why), false
	}
	ns := now.UnixNano()
	most := m.most()
	var out, cost int64
	got, refill := false, false
	c, err := e.leaseUpdate(key, kindSpend, func(c *leaseCell) bool {
		got, refill = false, false
		fresh := c.newPeriod(start, in.Amount)
		avail := c.free(ns)
		// The whole dearest cost from the lease; lowered to fit it only
		// when the fleet has nothing more to lease.
		if o, k, ok := m.fit(avail); ok && (k == most || c.noneUntil > ns) {
			out, cost = o, k
			c.hold(e.vm, cost, now, e.leaseTTL)
			c.lastUse, c.lastCost = ns, most
			got = true
			stale := ns-c.refillAt >= int64(refillTimeout)
			if avail-cost < most && c.downSince == 0 && c.noneUntil <= ns && stale {
				c.refillAt, refill = ns, true
			}
			return true
		}
		return fresh
	})
	if err != nil {
		return e.uncheckable(s, in, v, "its lease cell could not be updated: "+err.Error()), false
	}
	if refill {
		e.refill(in, kindSpend, now)
	}
	switch {
	case got:
		e.heldLeased(s, in, key, start, cost, out, m)
		return nil, false
	case c.noneUntil > ns:
		return e.refuseSpend(s, in, now, v, c.fleetA, heldInFlight(m, in.Amount, c.fleetA, c.fleetC), true), false
	case c.downSince != 0:
		return e.spendShare(s, in, m, now, v, "the fleet store (shared Redis) has not decided since "+time.Unix(0, c.downSince).UTC().Format(time.RFC3339)), false
	}
	if e.waitLease(s, in, i, kindSpend, most, m.least(), m, now) {
		return nil, true
	}
	return e.spendShare(s, in, m, now, v, s.wait.why), false
}

// free is what a spend lease has for calls: what was granted less what
// calls settled and hold, while Redis still counts it (renewed within
// spendFree); past that, nothing.
func (c *leaseCell) free(now int64) int64 {
	if c.expires <= now {
		return 0
	}
	return max(c.units-c.drawn-c.held(now), 0)
}

// newPeriod starts the lease over when the period it counted has ended
// (or the cell is new), and reports whether it did.
func (c *leaseCell) newPeriod(start, amount int64) bool {
	if c.anchor == start {
		return false
	}
	*c = leaseCell{kind: c.kind, anchor: start, granted: amount, replicas: c.replicas, downSince: c.downSince}
	return true
}

// heldLeased records the reservation a call holds on its lease, and its
// output maximum.
func (e *Engine) heldLeased(s *Stream, in *govern.Instance, key string, start, cost, out int64, m spendAsk) {
	s.spend = append(s.spend, spendReserve{key: key, typ: in.Limit.Type, start: start, amount: cost, rates: m.rates, lease: true})
	e.noteSpendHold(key, cost)
	e.lowerOutput(s, out)
}

// spendGranted takes a spend lease's answer: the grant goes into the
// lease, and each waiter, in order, holds its dearest cost from the lease
// (lowered to what is left when the fleet had no more), or hears no.
func (e *Engine) spendGranted(a *leaseAsk, l syncwire.Lease, ans leaseAnswer, waiters []leaseWaiter, now time.Time) {
	g := ans.grant
	ns := now.UnixNano()
	type served struct {
		outcome   leaseOutcome
		cost, out int64
	}
	res := make([]served, len(waiters))
	_, err := e.leaseUpdate(a.key, kindSpend, func(c *leaseCell) bool {
		c.newPeriod(l.Start, a.in.Amount)
		if c.anchor == l.Start {
			c.units = addSpend(c.units, g.Granted)
			c.expires = a.sent.Add(spendFree - leaseMargin).UnixNano()
			if g.Granted > 0 {
				c.lastUse = ns // a lease just granted is not idle
				if c.lotAt == 0 {
					c.lotAt = ns // the period's first grant: demand is measured from it
				}
			}
		}
		c.fleetA, c.fleetB, c.fleetC, c.seenAt = g.Spent, g.Left, g.InFlight, ns
		c.answered(a, ans)
		if !g.Allowed {
			c.noneUntil = ns + int64(spendNoneFor)
		}
		for i := range waiters {
			w := &waiters[i]
			res[i] = served{}
			if !w.live(a.key) {
				continue
			}
			out, cost, ok := w.spend.fit(c.free(ns))
			switch {
			case ok && (cost == w.spend.most() || !g.Allowed):
				c.hold(e.vm, cost, now, e.leaseTTL)
				c.lastUse, c.lastCost = ns, w.spend.most()
				res[i] = served{leaseGot, cost, out}
			case !g.Allowed:
				res[i] = served{outcome: leaseRefused}
			}
		}
		return true
	})
	if err != nil {
		e.logf(LogWarn, "keeping a lease of %s: %v (it lapses in Redis)", a.in.ID, err)
		for i := range waiters {
			if w := &waiters[i]; w.live(a.key) {
				w.s.wait.outcome, w.s.wait.why = leaseDown, "its lease cell could not be updated: "+err.Error()
			}
		}
		return
	}
	for i := range waiters {
		w := &waiters[i]
		if !w.live(a.key) || res[i].outcome == leaseNone {
			continue
		}
		w.s.wait.outcome, w.s.wait.cost, w.s.wait.out = res[i].outcome, res[i].cost, res[i].out
		w.s.wait.spent, w.s.wait.inFlight = g.Spent, g.InFlight
	}
}

// spendShare decides a reserve-mode call while the fleet does not decide
// (why): fail: closed with enforce: hard answers 503; otherwise the call
// holds what is left of the replica's lease and, past it, of its share
// (what the fleet had left, as last answered, over the replicas it last
// knew), and says suspended.
func (e *Engine) spendShare(s *Stream, in *govern.Instance, m spendAsk, now time.Time, v Verdict, why string) *Verdict {
	if reply := e.uncheckable(s, in, v, why); reply != nil {
		return reply
	}
	key := leaseKey(kindSpend, in.CellKey())
	start := calendar.Start(in.Limit.Period.Calendar, now).Unix()
	ns := now.UnixNano()
	var out, cost int64
	got := false
	var spent int64
	_, err := e.leaseUpdate(key, kindSpend, func(c *leaseCell) bool {
		got = false
		c.newPeriod(start, in.Amount)
		avail := c.free(ns)
		share := replicaShare(max(c.fleetB, 0), max(c.replicas, int64(e.replicas), 1))
		if c.seenAt == 0 {
			share = replicaShare(in.Amount, max(c.replicas, int64(e.replicas), 1))
		}
		room := avail + max(share-c.shareUsed, 0)
		spent = in.Amount - room
		o, k, ok := m.fit(room)
		if !ok {
			return false
		}
		out, cost, got = o, k, true
		c.hold(e.vm, cost, now, e.leaseTTL)
		c.shareUsed = addSpend(c.shareUsed, max(cost-avail, 0))
		c.lastUse = ns
		return true
	})
	if err != nil {
		return e.uncheckable(s, in, v, "its lease cell could not be updated: "+err.Error())
	}
	if !got {
		return e.refuseSpend(s, in, now, v, spent, 0, false)
	}
	e.heldLeased(s, in, key, start, cost, out, m)
	return nil
}

// settleLeasedSpend settles a reservation on a lease: the call's cost
// goes to the lease's own count and the reservation leaves this VM's
// hold, if the lease still counts the period.
func (e *Engine) settleLeasedSpend(sp spendReserve, actual int64, now time.Time) error {
	_, err := e.leaseUpdate(sp.key, kindSpend, func(c *leaseCell) bool {
		if c.anchor != sp.start {
			return false // a new period: the reservation went with the old one
		}
		c.drawn = addSpend(c.drawn, max(actual, 0))
		c.hold(e.vm, -sp.amount, now, e.leaseTTL)
		return true
	})
	return err
}
