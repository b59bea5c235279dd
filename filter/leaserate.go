package filter

import (
	"strconv"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/rate"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// store: redis rpm and tpm on leases. A lot is units of the fleet's cell
// (shared/rate's arithmetic, in Redis) counted at the lot's instant: for
// fixed_window and sliding_window, units of the current window, drawn
// until it ends (the fleet's window count holds them, so the fleet admits
// what one cell would); for gcra, units of the bucket, drawn for at most
// the lot's hold (half an emission interval, one to thirty seconds:
// accountant.LotHold), since a unit drawn later than it was counted has
// drained in Redis meanwhile. What a lot has left goes back with the next
// call (a window's to the window it was counted in, gcra's less what may
// have drained).

// rateNoneFor is the longest the fleet's "none left" holds before a
// request past the lease asks again.
const rateNoneFor = time.Second

// leaseMargin is taken off a lot's validity: the filter's clock and
// Redis's may differ by a little, and a unit of a window drawn after the
// window ended would be counted in neither.
const leaseMargin = 50 * time.Millisecond

// rateDecision is what a store: redis rate instance decided.
type rateDecision struct {
	res   rate.Result
	lot   int64 // the lot the cost came from (its anchor), 0 when none
	share bool  // decided within the replica's share (the fleet did not)
	wait  bool  // the request waits for a lease
	reply *Verdict
}

// leaseRate decides cost on the store: redis instance in at position i of
// its gate: from the replica's lot, from the answer the request waited
// for, by the fleet's last word that none is left, or, with Redis not
// deciding, within the replica's share (suspended; fail: closed answers
// 503).
func (e *Engine) leaseRate(s *Stream, in *govern.Instance, i int, cost int64, now time.Time, v Verdict) rateDecision {
	if o, ok := s.wait.answered(i); ok {
		switch o {
		case leaseGot:
			return rateDecision{res: s.wait.res, lot: s.wait.lot}
		case leaseRefused:
			return rateDecision{res: s.wait.res}
		}
		return e.rateShare(s, in, cost, now, v, s.wait.why)
	}
	key := leaseKey(kindRate, in.CellKey())
	ns := now.UnixNano()
	got, refill := false, false
	c, err := e.leaseUpdate(key, kindRate, func(c *leaseCell) bool {
		got, refill = false, false
		changed := false
		if c.units > 0 && ns >= c.expires {
			c.giveBack(in.Limit.Algorithm, c.units, c.anchor)
			c.units = 0
			changed = true
		}
		stale := ns-c.refillAt >= int64(refillTimeout)
		switch {
		case c.units >= cost:
			c.units -= cost
			c.drawn += cost
			c.lastUse, c.lastCost = ns, cost
			got, changed = true, true
			if c.units < c.lowWater(cost, ns) && c.downSince == 0 && c.noneUntil <= ns && stale {
				c.refillAt, refill = ns, true
			}
		case c.downSince != 0 && stale:
			// Redis did not decide: one call now and then tries again.
			c.refillAt, refill, changed = ns, true, true
		}
		return changed
	})
	if err != nil {
		return rateDecision{reply: e.uncheckable(s, in, v, "its lease cell could not be updated: "+err.Error())}
	}
	if refill {
		e.refill(in, kindRate, now)
	}
	switch {
	case got:
		return rateDecision{res: c.fleetResult(e.rateParams(in)), lot: c.anchor}
	case c.noneUntil > ns:
		return rateDecision{res: rate.Result{Limit: c.fleetA, RetryAfter: time.Duration(max(c.retryAt-ns, 0))}}
	case c.downSince != 0:
		why := "the fleet store (shared Redis) has not decided since " + time.Unix(0, c.downSince).UTC().Format(time.RFC3339)
		return e.rateShare(s, in, cost, now, v, why)
	}
	if e.waitLease(s, in, i, kindRate, cost, cost, spendAsk{}, now) {
		return rateDecision{wait: true}
	}
	return e.rateShare(s, in, cost, now, v, s.wait.why)
}

// fleetResult is what the replica knows of the fleet's cell: its limit as
// last answered, and what is left of it, this replica's lot included.
func (c *leaseCell) fleetResult(p rate.Params) rate.Result {
	limit := c.fleetA
	if limit <= 0 {
		limit = max(p.Burst, p.Amount)
	}
	return rate.Result{Allowed: true, Limit: limit, Remaining: min(addSpend(max(c.fleetB, 0), max(c.units, 0)), limit),
		ResetAfter: time.Duration(c.fleetC)}
}

// lowWater is what a lot keeps before it asks for more ahead of need: a
// quarter second of the replica's demand as the lot has seen it, and at
// least one more request's cost.
func (c *leaseCell) lowWater(cost, now int64) int64 {
	age := max(now-c.lotAt, int64(100*time.Millisecond))
	quarter := int64(float64(c.drawn) * float64(250*time.Millisecond) / float64(age))
	return max(cost, quarter)
}

// giveBack keeps units of lot anchor to go back to Redis with the next
// call. Two lots' units go as one: gcra's counted at the older instant
// (less is given back: what may have drained since is counted from it), a
// window's only the newer window's (an older window's count no longer
// matters but to the previous window of a sliding one).
func (c *leaseCell) giveBack(alg rate.Algorithm, units, anchor int64) {
	switch {
	case units <= 0:
	case c.backUnits == 0 || c.backAnchor == anchor:
		c.backUnits, c.backAnchor = c.backUnits+units, anchor
	case alg == rate.GCRA:
		c.backUnits, c.backAnchor = c.backUnits+units, min(c.backAnchor, anchor)
	case anchor > c.backAnchor:
		c.backUnits, c.backAnchor = units, anchor
	}
}

// rateGranted takes a rate lease's answer: each waiter, in order, gets its
// cost from the grant while it lasts, then from the lot (another VM's
// answer may have filled it meanwhile), or hears no when the fleet had
// none for all of them; the rest of the grant goes into the lot. A gcra
// grant joins a lot with half its hold or more left, keeping its instant
// and its end (its units are then drawn sooner than their own hold, and
// give back less when it ends); a window's joins its window's lot.
func (e *Engine) rateGranted(a *leaseAsk, l syncwire.Lease, ans leaseAnswer, waiters []leaseWaiter, now time.Time) {
	g := ans.grant
	ns := now.UnixNano()
	anchor, _ := strconv.ParseInt(g.Anchor, 10, 64)
	valid := time.Duration(g.ValidNS) - leaseMargin
	alg := a.in.Limit.Algorithm
	got := make([]bool, len(waiters))
	var lot int64
	_, err := e.leaseUpdate(a.key, kindRate, func(c *leaseCell) bool {
		live := c.expires > ns && c.anchor != 0
		// A gcra lot with half its hold left takes the grant in; later,
		// the grant starts a lot of its own and the old one's units go
		// back.
		young := alg == rate.GCRA && c.expires-ns > int64(valid/2)
		if !(live && (young || c.anchor == anchor)) {
			c.giveBack(alg, c.units, c.anchor)
			c.units, c.granted, c.drawn = 0, 0, 0
			c.anchor, c.lotAt, c.expires = anchor, a.sent.UnixNano(), a.sent.Add(valid).UnixNano()
		}
		lot = c.anchor
		left := g.Granted
		for i := range waiters {
			w := &waiters[i]
			got[i] = false
			if w.live(a.key) && w.need <= left {
				left -= w.need
				got[i] = true
			}
		}
		c.units += left
		c.granted += g.Granted
		c.drawn += g.Granted - left
		if g.Granted > 0 {
			c.lastUse = ns // a lot just filled is not idle
		}
		for i := range waiters {
			if w := &waiters[i]; !got[i] && w.live(a.key) && w.need <= c.units {
				c.units -= w.need
				c.drawn += w.need
				got[i] = true
			}
		}
		c.fleetA, c.fleetB, c.fleetC, c.seenAt = g.Limit, g.Remaining, g.ResetAfterNS, ns
		c.answered(a, ans)
		if !g.Allowed && g.RetryAfterNS > 0 {
			// The fleet's word holds a little while: the other replicas
			// give back what they do not use sooner than the wait says.
			c.retryAt = ns + g.RetryAfterNS
			c.noneUntil = ns + min(g.RetryAfterNS, int64(rateNoneFor))
		}
		if !a.wait {
			if g.Granted == 0 {
				// Nothing ahead of need is left: no other refill for a
				// while; a request that needs a unit still asks.
				c.refillAt = ns
			}
		}
		return true
	})
	if err != nil {
		e.logf(LogWarn, "keeping a lease of %s: %v (its units lapse in Redis)", a.in.ID, err)
		return
	}
	for i := range waiters {
		w := &waiters[i]
		switch {
		case !w.live(a.key):
		case got[i]:
			w.s.wait.outcome, w.s.wait.lot = leaseGot, lot
			w.s.wait.res = rate.Result{Allowed: true, Limit: g.Limit, Remaining: g.Remaining, ResetAfter: time.Duration(g.ResetAfterNS)}
		case !g.Allowed:
			w.s.wait.outcome = leaseRefused
			w.s.wait.res = rate.Result{Limit: g.Limit, Remaining: g.Remaining, RetryAfter: time.Duration(g.RetryAfterNS),
				ResetAfter: time.Duration(g.ResetAfterNS), Unfittable: g.Unfittable && w.need > g.Limit}
		}
	}
	e.noteFleetSeen(&a.in, rate.Result{Allowed: true, Limit: g.Limit, Remaining: g.Remaining, ResetAfter: time.Duration(g.ResetAfterNS)}, now)
}

// shareParams are the numbers of the replica's share of a store: redis
// rate instance: its amount and burst over the replicas it last knew.
func (e *Engine) shareParams(in *govern.Instance, c *leaseCell) rate.Params {
	p := e.rateParams(in)
	n := max(c.replicas, int64(e.replicas), 1)
	return rate.Params{Amount: replicaShare(p.Amount, n), Period: p.Period, Burst: replicaShare(max(p.Burst, p.Amount), n)}
}

// shareStart starts the replica's share of in when Redis stops deciding:
// ceil(what the fleet had left, as last answered, over the replicas it
// last knew) for now, refilling at the amount over the replicas.
func (e *Engine) shareStart(in *govern.Instance, c *leaseCell, now time.Time) {
	sp := e.shareParams(in, c)
	left := replicaShare(max(c.fleetB, 0), max(c.replicas, int64(e.replicas), 1))
	if c.seenAt == 0 {
		left = sp.Burst // the fleet never answered: the full share
	}
	st := rate.Adjust(in.Limit.Algorithm, rate.State{}, now, max(sp.Burst-left, 0), sp)
	e.cells.scratch = st.AppendBinary(e.cells.scratch[:0])
	if err := e.cells.put(shareKey(in.CellKey()), e.cells.scratch); err != nil {
		e.logf(LogWarn, "starting the replica's share of %s: %v", in.ID, err)
	}
}

// rateShare decides cost within the replica's share of in while the fleet
// does not decide (why): fail: closed with enforce: hard answers 503;
// otherwise the share's cell decides and the request says suspended,
// admitted or not.
func (e *Engine) rateShare(s *Stream, in *govern.Instance, cost int64, now time.Time, v Verdict, why string) rateDecision {
	if reply := e.uncheckable(s, in, v, why); reply != nil {
		return rateDecision{reply: reply}
	}
	c, _, _, err := e.leaseGet(leaseKey(kindRate, in.CellKey()), kindRate)
	if err != nil {
		return rateDecision{reply: e.uncheckable(s, in, v, "its lease cell could not be read: "+err.Error())}
	}
	res, err := e.cells.rateTake(shareKey(in.CellKey()), in.Limit.Algorithm, now, cost, e.shareParams(in, &c))
	if err != nil {
		return rateDecision{reply: e.uncheckable(s, in, v, "its share cell could not be updated: "+err.Error())}
	}
	return rateDecision{res: res, share: true}
}

// settleLeased corrects a store: redis tpm reserve r to the call's usage
// (delta = actual - reserved): in the lot it came from while that lot is
// the replica's (a credit goes back into it, a debit comes out of it),
// else, and for what the lot cannot pay, by the row's reconcile, which
// the accountant commits in Redis once. It reports what is left to the
// row.
func (e *Engine) settleLeased(r reserve, delta int64, now time.Time) int64 {
	if delta == 0 || r.lot == 0 {
		return delta
	}
	ns := now.UnixNano()
	rest := delta
	_, err := e.leaseUpdate(leaseKey(kindRate, r.key), kindRate, func(c *leaseCell) bool {
		rest = delta
		if c.anchor != r.lot || c.expires <= ns {
			return false
		}
		if delta < 0 {
			c.units -= delta
			rest = 0
		} else {
			take := min(delta, max(c.units, 0))
			c.units -= take
			rest = delta - take
		}
		return true
	})
	if err != nil {
		return delta
	}
	return rest
}

// returnLeased gives back the reserve r of a request refused after it was
// taken: into its lot while it is the replica's, else with the next lease
// call.
func (e *Engine) returnLeased(r reserve, now time.Time) {
	ns := now.UnixNano()
	_, err := e.leaseUpdate(leaseKey(kindRate, r.key), kindRate, func(c *leaseCell) bool {
		if c.anchor == r.lot && c.expires > ns {
			c.units += r.amount
		} else {
			c.giveBack(r.alg, r.amount, r.lot)
		}
		return true
	})
	if err != nil {
		e.logf(LogWarn, "giving back a tpm reserve on %s: %v (it drains with the window)", r.key, err)
	}
}

// reconcileEntry is a ledger.Row.Reconcile entry correcting reserve r by n.
func reconcileEntry(r reserve, n int64) string {
	b := make([]byte, 0, 64+len(r.id))
	b = append(b, r.alg.String()...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, r.params.Amount, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(r.params.Period), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, r.params.Burst, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, n, 10)
	b = append(b, ' ')
	b = append(b, r.id...)
	return string(b)
}
