package filter

import (
	"math"
	"strconv"
	"time"

	"github.com/tokentriage/tokentriage/shared/jsontok/jv"

	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/jsontok"
	"github.com/tokentriage/tokentriage/shared/rate"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// A VM asks its accountant for a lease in one call per lease cell at a
// time: the requests that find the lease empty while that call is out wait
// on it, and its answer serves them in the order they came, each from the
// grant itself (what is left goes into the lease for every VM of the
// host). A call ahead of need (a refill when a draw left the lease low)
// is made by one VM of the host at a time (the cell's refillAt). The
// answer runs on the plugin context, so a request that went away never
// loses the others' answer; each waiting request is woken as its own
// context.

// leaseOutcome is what a waiting request was told.
type leaseOutcome uint8

const (
	leaseNone    leaseOutcome = iota
	leaseGot                  // its need was granted to it
	leaseRefused              // the fleet has nothing for it now
	leaseDown                 // Redis did not decide: the limit is uncheckable
)

// leaseWait is a request's wait for a lease: where its gate's walk
// resumes, and what the answer said for the instance there.
type leaseWait struct {
	inst    []govern.Instance // the gate's instances, kept while it waits
	pos     int               // the walk resumes at this instance
	resume  bool              // the walk resumes (at pos) rather than starts
	gate    uint8             // 1 or 2
	eos     bool              // a headers-only request: gate 2 runs after gate 1
	edited  bool              // gate 1's header edits went with the pause
	key     string            // the lease cell waited on
	pending bool              // a lease call is out for it
	since   time.Time         // the first wait of this request, for its deadline
	// The answer for the instance at pos.
	outcome leaseOutcome
	res     rate.Result
	lot     int64 // a rate grant's lot (its anchor)
	why     string
	// A spend lease's answer: what the grant holds for the request (its
	// cost, its lowered output maximum), the fleet's spend and what its
	// calls in flight held.
	cost, out, spent, inFlight int64
}

func (w *leaseWait) reset() {
	*w = leaseWait{inst: w.inst[:0]}
}

// answered takes the answer for instance i, if there is one: the walk
// resumed there after a wait.
func (w *leaseWait) answered(i int) (leaseOutcome, bool) {
	if !w.resume || w.pos != i || w.outcome == leaseNone {
		return leaseNone, false
	}
	o := w.outcome
	w.outcome, w.resume = leaseNone, false
	return o, true
}

// leaseAsk is one VM's lease call for one lease cell.
type leaseAsk struct {
	key     string
	kind    byte
	lease   syncwire.Lease // the lease's numbers (kind, id, amount, ...)
	in      govern.Instance
	waiters []leaseWaiter
	sent    time.Time
	out     bool // the call is out
	// wait: requests wait on this call (e.asks); otherwise it is a refill
	// ahead of need (e.refills), on which no request waits.
	wait bool
	// id names the ask in Redis's record of grants: kept while its answer
	// was not heard (asked again, it gets that grant, not another).
	id string
	// timeout is the call's own timeout.
	timeout time.Duration
}

// leaseWaiter is one request waiting on a lease call.
type leaseWaiter struct {
	s     *Stream
	gen   uint64
	need  int64
	least int64 // a spend call's cost at one output token
	spend spendAsk
}

// live reports whether the waiter's request still waits on key.
func (w *leaseWaiter) live(key string) bool {
	return w.s.gen == w.gen && w.s.wait.pending && w.s.wait.key == key && !w.s.settled
}

// leaseTimeout is how long one lease call may take: shared_state.redis.timeout
// for the Redis operation and fleetHop for the way to the accountant and
// back.
func (e *Engine) leaseTimeout() time.Duration { return e.redisTimeout() + fleetHop }

// waitBudget is how long a request may wait for a lease in all: a call
// that missed its deadline goes again under the same ask (Redis answers it
// with what it granted, if it did), until the budget is spent; the request
// is then decided within the replica's share. Only the first requests of a
// burst, and those past an exhausted lease while the fleet has more, wait
// at all.
func (e *Engine) waitBudget() time.Duration { return e.redisTimeout() + refillWait }

// refillWait is what a waiting request may spend on calls that missed their
// deadline, beyond one Redis deadline: on a loaded machine a call to the
// sidecar now and then takes tens of milliseconds (a burst's first calls,
// arriving together on every replica, most of all).
const refillWait = time.Second

// fleetHop is what the way to the accountant and back may add to
// shared_state.redis.timeout, which bounds the Redis operation itself (the
// accountant runs it under that deadline, seed 002's per-operation
// deadline). The hop is a local call to the sidecar, well under a
// millisecond when the machine is busy; on a machine whose threads had
// slept it took 10 to 15 ms.
const fleetHop = 25 * time.Millisecond

// missLogEvery spaces the log lines of lease calls that missed their
// deadline.
const missLogEvery = 10 * time.Second

// refillTimeout is how long a call ahead of need may be out before another
// VM may make one.
const refillTimeout = 2 * time.Second

// redisTimeout is the plan's shared_state.redis.timeout.
func (e *Engine) redisTimeout() time.Duration {
	if d := e.plan.RedisTimeout(); d > 0 {
		return d
	}
	return govern.DefaultRedisTimeout
}

// waitLease makes request s wait for a lease of in at position i of its
// gate: it joins this VM's call for the cell, or makes one. need is what
// it needs (least the least it can do with). It returns false when the
// request may not wait any longer (its deadline passed) or the call
// cannot be made: the limit is then uncheckable (s.wait.why says why).
func (e *Engine) waitLease(s *Stream, in *govern.Instance, i int, kind byte, need, least int64, sp spendAsk, now time.Time) bool {
	key := leaseKey(kind, in.CellKey())
	w := &s.wait
	if w.since.IsZero() {
		w.since = now
	} else if now.Sub(w.since) >= e.waitBudget() {
		w.why = "no lease within " + e.waitBudget().String() + " (shared_state.redis.timeout " + e.redisTimeout().String() + " and " + refillWait.String() + " for calls that missed their deadline)"
		return false
	}
	if e.asks == nil {
		e.asks = map[string]*leaseAsk{}
	}
	a := e.asks[key]
	if a == nil {
		if r := e.refills[key]; r != nil && r.out {
			// A refill ahead of need is out on this VM: its answer serves
			// the request first (asking beside it, the two answers could
			// cross, and the request be refused while the refill's units
			// land).
			a = r
		} else {
			a = &leaseAsk{key: key, kind: kind, in: *in, lease: e.leaseOf(in, kind, now), wait: true}
			e.asks[key] = a
		}
	}
	a.waiters = append(a.waiters, leaseWaiter{s: s, gen: s.gen, need: need, least: least, spend: sp})
	w.pending, w.key, w.pos, w.outcome = true, key, i, leaseNone
	if !a.out {
		if err := e.sendAsk(a, now); err != nil {
			a.waiters = a.waiters[:len(a.waiters)-1]
			w.pending = false
			w.why = "the accountant could not be called: " + err.Error()
			return false
		}
	}
	return true
}

// leaseID is the counter in Redis instance in's lease is of: its
// identity, or, for a per-value instance whose value is counted in the
// overflow cell (its slots all held), the overflow counter, which every
// replica's overflowed values share as its cell here does.
func leaseID(in *govern.Instance) string {
	l := in.Limit
	if l.PerValue() && in.Cell != "" && in.Cell == overflowCell(govern.DistinctBase(l, in.Node)) {
		return govern.OverflowIdentity(l, in.Node)
	}
	return in.ID
}

// leaseOf is the lease's numbers for instance in.
func (e *Engine) leaseOf(in *govern.Instance, kind byte, now time.Time) syncwire.Lease {
	l := in.Limit
	id := leaseID(in)
	switch kind {
	case kindRate:
		p := e.rateParams(in)
		return syncwire.Lease{Kind: syncwire.LeaseRate, ID: id, Alg: l.Algorithm.String(), Amount: p.Amount,
			PeriodNS: int64(p.Period), Burst: p.Burst}
	case kindSpend:
		return syncwire.Lease{Kind: syncwire.LeaseSpend, ID: id, Amount: in.Amount, Unit: l.Period.Calendar.String(),
			Start: calendar.Start(l.Period.Calendar, now).Unix()}
	}
	return syncwire.Lease{Kind: syncwire.LeaseSlots, ID: id, Amount: in.Amount}
}

// refill asks for a lease of in ahead of need (a draw left it low), unless
// this VM has such a call out already.
func (e *Engine) refill(in *govern.Instance, kind byte, now time.Time) {
	key := leaseKey(kind, in.CellKey())
	if e.refills == nil {
		e.refills = map[string]*leaseAsk{}
	}
	if e.refills[key] != nil {
		return
	}
	a := &leaseAsk{key: key, kind: kind, in: *in, lease: e.leaseOf(in, kind, now)}
	e.refills[key] = a
	if err := e.sendAsk(a, now); err != nil {
		delete(e.refills, key)
	}
}

// sendAsk sends a's call: the needs of its waiters, or a refill ahead of
// need, with whatever the cell has to give back or renew.
func (e *Engine) sendAsk(a *leaseAsk, now time.Time) error {
	wait := a.wait
	l := a.lease
	if a.id == "" {
		// An ask whose answer was not heard first: this call owns it now
		// (it is back in unclaimed if this one goes unheard too).
		a.id = e.unclaimed[a.key]
		delete(e.unclaimed, a.key)
	}
	if a.id == "" {
		e.askSeq++
		a.id = e.replica + "/" + strconv.FormatUint(uint64(e.vm), 36) + "/" + strconv.FormatUint(e.askSeq, 36)
	}
	l.Ask = a.id
	if a.kind == kindSpend {
		l.Start = calendar.Start(a.in.Limit.Period.Calendar, now).Unix()
	}
	l.Need, l.Least = 0, 0
	for i, w := range a.waiters {
		l.Need = addSpend(l.Need, w.need)
		if i == 0 {
			l.Least = w.least // the first served can do with its least
		}
	}
	if !wait {
		l.Need, l.Least = 0, 0
	}
	if l.Least == 0 {
		l.Least = l.Need
	}
	c, _ := e.leaseUpdate(a.key, a.kind, func(c *leaseCell) bool {
		e.fillLease(&l, c, now)
		if c.backUnits > 0 {
			c.backUnits, c.backAnchor = 0, 0 // they go with this call
			return true
		}
		return false
	})
	l.Extra = e.leaseExtra(&c, a.kind, l.Need, now)
	timeout := refillTimeout
	var deadline time.Duration
	if wait {
		// As long as the first waiter may still wait, and at least one
		// Redis deadline: the accountant gives Redis that long.
		deadline = e.redisTimeout()
		for _, w := range a.waiters {
			if w.live(a.key) {
				deadline = max(deadline, e.waitBudget()-now.Sub(w.s.wait.since))
				break
			}
		}
		timeout = deadline + fleetHop
	}
	body := e.leaseBody([]syncwire.Lease{l}, wait, deadline)
	a.out, a.sent, a.timeout = true, now, timeout
	err := e.callPlugin("POST", syncwire.LeasePath, jsonHeaders, body, timeout, func(status int, answer []byte) {
		e.leaseAnswered(a, l, status, answer)
	})
	if err != nil {
		a.out = false
		e.noteFleet("the accountant could not be called: " + err.Error())
	}
	return err
}

// fillLease adds to l what cell c gives back and says it holds.
func (e *Engine) fillLease(l *syncwire.Lease, c *leaseCell, now time.Time) {
	switch c.kind {
	case kindRate:
		if c.backUnits > 0 {
			l.Back, l.Anchor = c.backUnits, strconv.FormatInt(c.backAnchor, 10)
		} else if c.units > 0 && c.expires > now.UnixNano() {
			l.Granted, l.Anchor = c.granted, strconv.FormatInt(c.anchor, 10)
		}
	case kindSpend:
		if c.anchor == l.Start {
			// What Redis counts before it takes the give-back (after
			// Redis lost its data, it starts from this).
			l.Granted, l.Held = c.units+l.Back, c.held(now.UnixNano())
		}
	case kindSlots:
		l.Held = c.units
	}
}

// leaseExtra is what a call asks for ahead of need: about a second of the
// replica's demand as its lease has seen it (rate: drawn from the lot;
// spend: settled since the period's first grant), and at least one
// request's worth (the last cost); Redis grants at most half of what is
// left.
func (e *Engine) leaseExtra(c *leaseCell, kind byte, need int64, now time.Time) int64 {
	if kind == kindSlots {
		return 0 // a slot comes back with its call: no demand to run ahead of
	}
	extra := max(c.lastCost, need)
	if c.lotAt > 0 {
		age := max(now.UnixNano()-c.lotAt, int64(100*time.Millisecond))
		perSecond := float64(c.drawn) * float64(time.Second) / float64(age)
		extra = max(extra, int64(min(perSecond, float64(math.MaxInt64/4)))+1)
	}
	return extra
}

// leaseBody is a lease call's body.
func (e *Engine) leaseBody(ls []syncwire.Lease, wait bool, deadline time.Duration) []byte {
	b := append(e.buf[:0], `{"replica":`...)
	b = jsontok.AppendString(b, e.replica)
	if wait {
		b = append(b, `,"wait":true,"deadline_ns":`...)
		b = strconv.AppendInt(b, int64(deadline), 10)
	}
	b = append(b, `,"lease_ttl_ns":`...)
	b = strconv.AppendInt(b, int64(e.leaseTTL), 10)
	b = append(b, `,"leases":[`...)
	for i, l := range ls {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendLease(b, &l)
	}
	b = append(b, "]}"...)
	e.buf = b[:0]
	return append([]byte(nil), b...)
}

// appendLease appends one syncwire.Lease.
func appendLease(b []byte, l *syncwire.Lease) []byte {
	b = append(b, `{"kind":"`...)
	b = append(b, l.Kind...)
	b = append(b, `","id":`...)
	b = jsontok.AppendString(b, l.ID)
	b = appendField(b, "alg", 0, l.Alg)
	b = appendField(b, "amount", l.Amount, "")
	b = appendField(b, "period_ns", l.PeriodNS, "")
	b = appendField(b, "burst", l.Burst, "")
	b = appendField(b, "unit", 0, l.Unit)
	b = appendField(b, "start", l.Start, "")
	b = appendField(b, "need", l.Need, "")
	b = appendField(b, "least", l.Least, "")
	b = appendField(b, "extra", l.Extra, "")
	b = appendField(b, "back", l.Back, "")
	b = appendField(b, "anchor", 0, l.Anchor)
	b = appendField(b, "ask", 0, l.Ask)
	b = appendField(b, "granted", l.Granted, "")
	b = appendField(b, "held", l.Held, "")
	return append(b, '}')
}

// appendField appends `,"name":n` when n is not 0, else `,"name":"s"`
// when s is not empty (algorithm, unit, anchor and ask names: letters,
// digits and "-_/", which need no escaping).
func appendField(b []byte, name string, n int64, s string) []byte {
	if n == 0 && s == "" {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	if s == "" {
		return strconv.AppendInt(b, n, 10)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// callPlugin makes a callout whose answer runs on the plugin context when
// the host can (every request's answer must be delivered, whichever
// request made the call), else on the caller's.
func (e *Engine) callPlugin(method, path string, headers [][2]string, body []byte, timeout time.Duration, cb func(int, []byte)) error {
	if pc, ok := e.host.Caller.(PluginCaller); ok {
		return pc.CallForPlugin(method, path, headers, body, timeout, cb)
	}
	return e.host.Caller.Call(method, path, headers, body, timeout, cb)
}

var jsonHeaders = [][2]string{{"content-type", "application/json"}}

// leaseAnswer is a lease call's answer, read.
type leaseAnswer struct {
	grant syncwire.LeaseGrant
	why   string // Redis did not decide: why ("" when it did)
	// down: it does not decide for now (no Redis, Redis lost, its data
	// being counted again, the accountant unreachable); otherwise a call
	// that failed alone (a deadline), which may be asked again.
	down     bool
	replicas int64
}

// readLeaseAnswer reads the answer to a call of one lease.
func (e *Engine) readLeaseAnswer(status int, answer []byte, timeout time.Duration) leaseAnswer {
	var a leaseAnswer
	switch {
	case status == 0:
		a.why, a.down = "the accountant did not answer", true
	case status == 504:
		a.why = "no answer within " + timeout.String() + " (what the waiting requests had left, at least shared_state.redis.timeout " + e.redisTimeout().String() + ", and " + fleetHop.String() + " for the way to the accountant and back)"
	case status != 200:
		a.why, a.down = "the accountant answered "+strconv.Itoa(status), true
	case jsontok.Valid(answer, jsontok.GJSON).Code != jsontok.ErrNone:
		a.why, a.down = "the accountant's answer is not JSON", true
	}
	if a.why != "" {
		return a
	}
	r := jv.ParseBytes(answer)
	a.replicas = r.Get("replicas").Int()
	if why := r.Get("suspended").String(); why != "" {
		a.why, a.down = why, r.Get("down").Bool()
		return a
	}
	g := r.Get("leases.0")
	if !g.Exists() {
		a.why = "the accountant's answer has no lease"
		return a
	}
	a.grant = parseGrant(g)
	if a.grant.Error != "" {
		a.why = "the shared Redis refused the lease: " + a.grant.Error
	}
	return a
}

// parseGrant reads one syncwire.LeaseGrant.
func parseGrant(g jv.Value) syncwire.LeaseGrant {
	var out syncwire.LeaseGrant
	g.ForEach(func(k, v jv.Value) bool {
		switch k.Str {
		case "allowed":
			out.Allowed = v.Bool()
		case "unfittable":
			out.Unfittable = v.Bool()
		case "anchor":
			out.Anchor = v.String()
		case "error":
			out.Error = v.String()
		default:
			if p := grantField(&out, k.Str); p != nil {
				*p = v.Int()
			}
		}
		return true
	})
	return out
}

// grantField is the integer field of g named name, nil for none.
func grantField(g *syncwire.LeaseGrant, name string) *int64 {
	switch name {
	case "granted":
		return &g.Granted
	case "limit":
		return &g.Limit
	case "remaining":
		return &g.Remaining
	case "retry_after_ns":
		return &g.RetryAfterNS
	case "reset_after_ns":
		return &g.ResetAfterNS
	case "valid_ns":
		return &g.ValidNS
	case "spent":
		return &g.Spent
	case "in_flight":
		return &g.InFlight
	case "left":
		return &g.Left
	case "others":
		return &g.Others
	case "mine":
		return &g.Mine
	}
	return nil
}

// leaseAnswered takes the answer to a's call (sent as l): the grant into
// the lease and to its waiters, or Redis not deciding; then wakes them.
func (e *Engine) leaseAnswered(a *leaseAsk, l syncwire.Lease, status int, answer []byte) {
	now := e.host.Now()
	ans := e.readLeaseAnswer(status, answer, a.timeout)
	a.out = false
	waiters := a.waiters
	a.waiters = nil
	if ans.why != "" && !ans.down {
		// Not heard (a deadline): Redis may have granted it. The same ask
		// goes again, and gets that grant if it did.
		if e.unclaimed == nil {
			e.unclaimed = map[string]string{}
		}
		e.unclaimed[a.key] = a.id
	} else {
		if e.unclaimed[a.key] == a.id {
			delete(e.unclaimed, a.key)
		}
		a.id = ""
	}
	switch {
	case ans.down:
		e.leaseDown(a, ans, now)
		for i := range waiters {
			w := &waiters[i]
			if w.live(a.key) {
				w.s.wait.outcome, w.s.wait.why = leaseDown, ans.why
			}
		}
	case ans.why != "":
		// Waiters with time left ask again; the others are decided
		// within the share.
		late := 0
		for i := range waiters {
			w := &waiters[i]
			if w.live(a.key) && now.Sub(w.s.wait.since) >= e.waitBudget() {
				w.s.wait.outcome, w.s.wait.why = leaseDown, ans.why
				late++
			}
		}
		if late > 0 && now.Sub(e.missLogged) >= missLogEvery {
			e.missLogged = now
			e.logf(LogWarn, "fleet leases: %s; %d requests waiting for a lease of %s were decided within the replica's share and said suspended (this line at most every %s)", ans.why, late, a.in.ID, missLogEvery)
		}
		if c, _, _, err := e.leaseGet(a.key, a.kind); err == nil && late > 0 && now.UnixNano()-c.seenAt > int64(e.waitBudget()) {
			// No answer for a whole wait budget: Redis is too slow to
			// wait for. Past their leases requests are decided within
			// the share at once, until a call succeeds again.
			ans.down = true
			e.leaseDown(a, ans, now)
		}
	case a.kind == kindRate:
		e.rateGranted(a, l, ans, waiters, now)
	case a.kind == kindSpend:
		e.spendGranted(a, l, ans, waiters, now)
	default:
		e.slotsGranted(a, l, ans, waiters, now)
	}
	if ans.down || ans.why == "" {
		e.noteFleet(ans.why)
	}
	// Waiters the grant did not serve, and that did not hear no, ask again
	// (a refill they joined hands them to a call of their own).
	if !a.wait {
		delete(e.refills, a.key)
	} else if !a.out && len(a.waiters) == 0 {
		delete(e.asks, a.key)
	}
	var again []leaseWaiter
	for i := range waiters {
		if w := &waiters[i]; w.live(a.key) && w.s.wait.outcome == leaseNone {
			again = append(again, *w)
		}
	}
	if len(again) > 0 {
		w := e.asks[a.key]
		if w == nil {
			w = &leaseAsk{key: a.key, kind: a.kind, in: a.in, lease: a.lease, wait: true}
			e.asks[a.key] = w
		}
		w.waiters = append(w.waiters, again...)
		if !w.out {
			if err := e.sendAsk(w, now); err != nil {
				for i := range w.waiters {
					w.waiters[i].s.wait.outcome, w.waiters[i].s.wait.why = leaseDown, "the accountant could not be called: "+err.Error()
				}
				waiters = append(waiters, w.waiters...)
				w.waiters = nil
				delete(e.asks, a.key)
			}
		}
	}
	for i := range waiters {
		w := &waiters[i]
		if w.live(a.key) && w.s.wait.outcome != leaseNone {
			w.s.wait.pending = false
			e.resumeWalk(w.s)
		}
	}
}

// leaseDown records that Redis did not decide a lease of a's cell: every
// VM of the host answers past its lease within the replica's share until
// a call succeeds again.
func (e *Engine) leaseDown(a *leaseAsk, ans leaseAnswer, now time.Time) {
	ns := now.UnixNano()
	fresh := false
	c, err := e.leaseUpdate(a.key, a.kind, func(c *leaseCell) bool {
		fresh = c.downSince == 0
		if fresh {
			c.downSince = ns
		}
		c.refillAt = 0
		if ans.replicas > 0 {
			c.replicas = ans.replicas
		}
		return true
	})
	if err == nil && fresh && a.kind == kindRate {
		e.shareStart(&a.in, &c, now)
	}
}

// resumeWalk runs the walk of a request that waited, from where it waited,
// and carries out its verdict.
func (e *Engine) resumeWalk(s *Stream) {
	now := e.host.Now()
	s.wait.resume = true
	if s.wait.gate == 1 {
		s.wake(e.gate1Walk(s, s.wait.inst, now, s.wait.eos, Verdict{}))
		return
	}
	s.wake(e.gate2Walk(s, s.wait.inst, s.body, now, Verdict{}))
}

// noteFleet logs the transitions of the fleet store as this VM sees them:
// one line when Redis stops deciding (and why), one when it decides again.
func (e *Engine) noteFleet(why string) {
	switch {
	case why != "" && !e.fleetDown:
		e.fleetDown = true
		e.logf(LogWarn, "fleet leases: %s; every fleet limit answers inside the lease this replica holds, and past it within the replica's share, saying suspended, until the fleet store answers again", why)
	case why == "" && e.fleetDown:
		e.fleetDown = false
		e.logf(LogInfo, "fleet leases: the fleet store answers again")
	}
}
