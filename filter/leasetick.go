package filter

import (
	"time"

	"github.com/tokentriage/tokentriage/shared/jsontok/jv"

	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// A replica's leases are renewed once a second (one VM of the host does
// each cell's, the first whose tick finds it due): a spend lease and a
// concurrency lease with what they hold, so Redis counts them while the
// replica lives and lets them lapse when it is lost; a rate lot with what
// it took, so that a Redis that lost its data counts it again. The same
// call gives back what a rate lot had left when it ended, and what a lease
// has not drawn on for leaseIdle. When the host stops, each VM gives back
// what the leases it used hold.

const (
	// leaseRenewEvery is how often a lease is renewed.
	leaseRenewEvery = time.Second
	// leaseIdle is how long a lease may go unused before what it has left
	// goes back for the other replicas.
	leaseIdle = 5 * time.Second
	// spendFree is how long Redis counts a spend lease's part not held by
	// a call in flight after its last renewal (accountant.LeaseFree): past
	// it the replica draws only on what its calls hold.
	spendFree = 10 * time.Second
	// maxLeasesSeen bounds the lease cells a VM renews.
	maxLeasesSeen = 4096
)

// seeLease notes that this VM uses the lease of in at key, so its tick
// renews it.
func (e *Engine) seeLease(key string, in *govern.Instance) {
	if old, ok := e.leasesSeen[key]; ok && old.Amount == in.Amount && old.ID == in.ID {
		return
	}
	if e.leasesSeen == nil {
		e.leasesSeen = map[string]govern.Instance{}
	}
	if len(e.leasesSeen) < maxLeasesSeen {
		e.leasesSeen[key] = *in
	}
}

// leaseTick renews the leases due, from the tick.
func (e *Engine) leaseTick(now time.Time) {
	if e.host.Caller == nil || len(e.leasesSeen) == 0 || now.Sub(e.leaseTicked) < leaseRenewEvery {
		return
	}
	e.leaseTicked = now
	e.renewLeases(now, false)
}

// renewLeases sends one call renewing (all: giving back everything of)
// the leases this VM uses whose renewal is due.
func (e *Engine) renewLeases(now time.Time, all bool) {
	ns := now.UnixNano()
	var ls []syncwire.Lease
	var keys []string
	for key, in := range e.leasesSeen {
		kind := key[len("tt/lease/")]
		l := e.leaseOf(&in, kind, now)
		live := int64(0)
		if kind == kindSlots {
			live, _ = e.cells.gaugeRead(in.CellKey(), now)
		}
		due := false
		_, err := e.leaseUpdate(key, kind, func(c *leaseCell) bool {
			l2 := l
			due = all || ns-c.renewAt >= int64(leaseRenewEvery*9/10)
			if !due {
				return false
			}
			c.renewAt = ns
			switch kind {
			case kindRate:
				idle := ns-c.lastUse >= int64(leaseIdle)
				if c.units > 0 && (all || idle || ns >= c.expires) {
					c.giveBack(in.Limit.Algorithm, c.units, c.anchor)
					c.units = 0
				}
				e.fillLease(&l2, c, now)
				c.backUnits, c.backAnchor = 0, 0
				due = l2.Back > 0 || l2.Granted > 0
			case kindSpend:
				start := calendar.Start(in.Limit.Period.Calendar, now).Unix()
				if c.newPeriod(start, in.Amount) || c.units <= 0 {
					due = false
					return true
				}
				avail := max(c.units-c.drawn-c.held(ns), 0)
				if avail > 0 && (all || ns-c.lastUse >= int64(leaseIdle) || c.expires <= ns) {
					l2.Back = avail
					c.units -= avail
				}
				e.fillLease(&l2, c, now)
			case kindSlots:
				keep := live + 1
				if all {
					keep = live
				}
				if c.units > keep && (all || ns-c.lotAt >= int64(leaseIdle)) {
					l2.Back = c.units - keep
					c.units = keep
				}
				l2.Held = c.units + l2.Back // what Redis counts before it takes the give-back
				due = c.units > 0 || l2.Back > 0
			}
			l = l2
			return true
		})
		if err != nil || !due {
			continue
		}
		l.Ask = e.unclaimed[key] // an ask not heard: its grant comes back here
		ls = append(ls, l)
		keys = append(keys, key)
	}
	if len(ls) == 0 {
		return
	}
	body := e.leaseBody(ls, false, 0)
	sent := now
	err := e.callPlugin("POST", syncwire.LeasePath, jsonHeaders, body, refillTimeout, func(status int, answer []byte) {
		e.renewed(keys, sent, status, answer)
	})
	if err != nil {
		e.noteFleet("the accountant could not be called: " + err.Error())
	}
}

// renewed takes a renewal's answer: each lease's fleet figures and its new
// expiry, or, when Redis did not decide, every lease marked so (past
// them, the replica's share answers).
func (e *Engine) renewed(keys []string, sent time.Time, status int, answer []byte) {
	now := e.host.Now()
	ns := now.UnixNano()
	ans := e.readLeaseAnswer(status, answer, refillTimeout)
	if ans.down || ans.why == "" {
		e.noteFleet(ans.why)
	}
	var grants []jv.Value
	if ans.why == "" {
		grants = jv.GetBytes(answer, "leases").Array()
	}
	for i, key := range keys {
		kind := key[len("tt/lease/")]
		in := e.leasesSeen[key]
		var g syncwire.LeaseGrant
		if i < len(grants) {
			g = parseGrant(grants[i])
		}
		switch {
		case ans.why != "" && !ans.down:
			continue // a deadline: the next renewal goes in a second
		case ans.why != "" || i >= len(grants) || g.Error != "":
			why := ans.why
			if why == "" {
				why = "the shared Redis refused the renewal"
			}
			e.leaseDown(&leaseAsk{key: key, kind: kind, in: in}, leaseAnswer{why: why, replicas: ans.replicas}, now)
			continue
		}
		if id := e.unclaimed[key]; id != "" {
			delete(e.unclaimed, key)
			if g.Granted > 0 {
				// The grant of an ask whose answer was not heard.
				a := &leaseAsk{key: key, kind: kind, in: in, sent: sent}
				la := leaseAnswer{grant: g, replicas: ans.replicas}
				switch kind {
				case kindRate:
					e.rateGranted(a, a.lease, la, nil, now)
				case kindSpend:
					a.lease.Start = calendar.Start(in.Limit.Period.Calendar, sent).Unix()
					e.spendGranted(a, a.lease, la, nil, now)
				default:
					e.slotsGranted(a, a.lease, la, nil, now)
				}
				continue
			}
		}
		_, err := e.leaseUpdate(key, kind, func(c *leaseCell) bool {
			c.downSince = 0
			if ans.replicas > 0 {
				c.replicas = ans.replicas
			}
			c.seenAt = ns
			switch kind {
			case kindRate:
				c.fleetA, c.fleetB, c.fleetC = g.Limit, g.Remaining, g.ResetAfterNS
			case kindSpend:
				c.fleetA, c.fleetB, c.fleetC = g.Spent, g.Left, g.InFlight
				c.expires = sent.Add(spendFree - leaseMargin).UnixNano()
			case kindSlots:
				c.fleetA = g.Others
				c.units = g.Mine
				c.expires = sent.Add(slotTTL - leaseMargin).UnixNano()
			}
			return true
		})
		if err != nil {
			e.logf(LogWarn, "renewing the lease of %s: %v", in.ID, err)
		}
	}
}
