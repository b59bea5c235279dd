package filter

import (
	"path"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/llm"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// MaxBody is the request body cap.
func (e *Engine) MaxBody() int64 { return e.cfg.MaxBodyBytes }

// BodySource reads the buffered request body: its first n bytes.
type BodySource interface {
	Body(n int) []byte
}

// RequestBody handles a request body callback. size is the number of bytes
// buffered so far (the host reports the total after a Pause); body is read
// only at the end of the stream of a governed request.
func (e *Engine) RequestBody(s *Stream, size int, eos bool, body BodySource) Verdict {
	if !s.governs || s.replied {
		return Verdict{}
	}
	if s.held || s.wait.pending {
		e.sawHeldBody() // a filter paused at the headers gets the body
	}
	s.bodySize = size
	if int64(size) > e.cfg.MaxBodyBytes {
		e.releaseLeases(s, e.host.Now())
		if s.unarmed {
			s.governs = false // nothing is governed yet: stop buffering it
			s.forwarded = true
			return Verdict{}
		}
		return e.reject(s, Verdict{}, wire.TooLarge(s.id, e.cfg.MaxBodyBytes))
	}
	if s.wait.pending && s.wait.gate == 1 {
		// Gate 1 still waits for a lease: keep the body for gate 2,
		// which runs once gate 1 has decided.
		if eos {
			s.bodyIn = bodyInEnd
		}
		return Verdict{Action: ActPause}
	}
	if !eos {
		return Verdict{Action: ActPause}
	}
	return e.gate2(s, body.Body(size), Verdict{})
}

const (
	bodyInNone uint8 = iota
	bodyInEnd
	bodyInTrailers
)

// BodyAfterWait runs gate 2 on a body that was complete before gate 1's
// lease came (the binding calls it on that answer).
func (e *Engine) BodyAfterWait(s *Stream, body BodySource) Verdict {
	in := s.bodyIn
	s.bodyIn = bodyInNone
	if in == bodyInTrailers {
		return e.RequestTrailers(s, body)
	}
	return e.RequestBody(s, s.bodySize, true, body)
}

// RequestTrailers handles the request trailers. A body followed by
// trailers never reaches a body callback with end of stream (the last one
// reports eos false), so gate 2 runs here, on what was buffered: without
// it, a client could skip gate 2 by sending trailers.
func (e *Engine) RequestTrailers(s *Stream, body BodySource) Verdict {
	if !s.governs || s.replied || s.forwarded {
		return Verdict{}
	}
	if s.held {
		e.sawHeldBody()
	}
	if s.wait.pending && s.wait.gate == 1 {
		s.bodyIn = bodyInTrailers
		return Verdict{Action: ActPause}
	}
	b := body.Body(int(e.cfg.MaxBodyBytes) + 1)
	if int64(len(b)) > e.cfg.MaxBodyBytes {
		return e.RequestBody(s, len(b), true, bytesSource(b))
	}
	s.bodySize = len(b)
	return e.gate2(s, b, Verdict{})
}

// bytesSource is a BodySource over bytes already read.
type bytesSource []byte

func (b bytesSource) Body(n int) []byte { return b[:min(n, len(b))] }

// gate2 parses the complete body, checks the model scope, and evaluates
// budget_usd, quota_tokens, quota_requests (from the snapshot, or a
// reservation in reserve mode) and tpm (a reserve), deepest instance
// first, stopping at the first over. The fleet's limits (store: redis
// tpm, reserve mode with the fleet's Redis) decide on the replica's
// leases, and a request whose lease is empty waits at its body for a
// refill, so the walk judges every instance at its own place in seed
// 004's order, whatever store it uses.
func (e *Engine) gate2(s *Stream, body []byte, v Verdict) Verdict {
	now := e.host.Now()
	var paths []string
	if !s.unarmed {
		paths = e.attributePaths(s)
	}
	req, fields, err := llm.ParseRequestFields(s.path, body, paths, e.fields)
	e.fields = fields
	if err != nil {
		if s.unarmed {
			s.forwarded = true
			return v // nothing is governed yet: let the provider answer it
		}
		e.releaseLeases(s, now)
		return e.reject(s, v, wire.BadBody(s.id, s.path, err.Error()))
	}
	s.req, s.parsed = req, true
	s.dims.Model = req.Model
	s.fb.mark(s)
	s.outMax = -1
	if s.unarmed {
		return e.gate2Done(s, body, v)
	}
	if r := e.checkModelName(s); r != nil {
		e.releaseLeases(s, now)
		return e.reject(s, v, *r)
	}
	if r := e.bodyAttributes(s); r != nil {
		e.releaseLeases(s, now)
		return e.reject(s, v, *r)
	}
	if sc := s.scopes; sc != nil && sc.Models != nil && !modelAllowed(sc.Models, req.Model) {
		e.releaseLeases(s, now)
		return e.reject(s, v, wire.ScopeDenied(s.id, s.kid, wire.ScopeModels, req.Model, sc.Models))
	}
	if sc := s.scopes; sc != nil && sc.Customers != nil && !customerAllowed(sc.Customers, s.dims.Customer) {
		e.releaseLeases(s, now)
		return e.reject(s, v, wire.ScopeDenied(s.id, s.kid, wire.ScopeCustomers, s.dims.Customer, sc.Customers))
	}
	if insts := e.resolveGate(s, govern.Gate2); s.key != nil {
		e.inst = append(e.inst[:0], insts...) // bindValues changes them
	}
	e.bindValues(s, e.inst, now)
	s.wait.reset() // gate 1's wait is done with
	return e.gate2Walk(s, e.inst, body, now, v)
}

// gate2Walk evaluates the gate-2 instances in order, stopping at the first
// over, with everything the request holds handed back on a refusal. It
// runs on the body, or again, from where it stopped, when the lease a
// request waited for is answered (s.wait).
func (e *Engine) gate2Walk(s *Stream, insts []govern.Instance, body []byte, now time.Time, v Verdict) Verdict {
	start := 0
	if s.wait.resume && s.wait.gate == 2 {
		start = s.wait.pos // the instance there takes the answer (leaseWait.answered)
	}
	for i := start; i < len(insts); i++ {
		in := &insts[i]
		var reply *Verdict
		wait := false
		switch l := in.Limit; {
		case l.Type == govern.RPM:
			// An rpm limit narrowed by the model (or the customer, or a
			// tag) is judged here, where the body has named it; a store:
			// redis one on the replica's lease, as at gate 1.
			reply, wait = e.checkRPM(s, in, i, now, v)
		case l.Type == govern.Concurrency:
			reply, wait = e.checkConcurrency(s, in, i, now, v)
		case l.Type == govern.TPM && l.Store == govern.StoreRedis && e.leased(in):
			reply, wait = e.checkLeasedTPM(s, in, i, now, v)
		case l.Type == govern.TPM:
			reply = e.checkTPM(s, in, now, v)
		case l.Reserve && l.Mode == govern.ModeOn && e.leased(in):
			e.seeLease(leaseKey(kindSpend, in.CellKey()), in)
			reply, wait = e.checkLeasedSpend(s, in, i, now, v)
		case l.Reserve && l.Mode == govern.ModeOn:
			reply = e.checkReserve(s, in, now, v)
		default:
			reply = e.checkSettled(s, in, now, v)
		}
		if wait {
			// The request waits at its body for its lease; the body is
			// the engine's buffer, valid only in this callback, so the
			// request keeps a copy.
			w := &s.wait
			w.inst = append(w.inst[:0], insts...)
			w.gate = 2
			if len(body) > 0 && (len(s.body) == 0 || &body[0] != &s.body[0]) {
				s.body = append(s.body[:0], body...)
			}
			v.Action = ActPause
			return v
		}
		if reply != nil {
			switch {
			case s.fb.held:
				return e.fallBack(s, body, now, v)
			case s.fb.trying:
				return e.refusedFallback(s, now, v)
			}
			e.handBack(s, now)
			return *reply
		}
	}
	s.wait.since = time.Time{}
	return e.gate2Done(s, body, v)
}

// handBack gives back everything a request refused at gate 2 holds: tpm
// reserves, reservations of reserve mode and concurrency leases.
func (e *Engine) handBack(s *Stream, now time.Time) {
	e.returnReserves(s, now)
	e.settleSpend(s, false, now)
	e.releaseLeases(s, now)
}

// gate2Done rewrites the body where gate 2 asks it (the output maximum a
// reserve lowered, the usage a stream must report), sets what held
// headers carry, and lets the request go.
func (e *Engine) gate2Done(s *Stream, body []byte, v Verdict) Verdict {
	req := s.req
	if s.fb.trying {
		// Served with the fallback model: body is the one whose model
		// fallBack rewrote (fallback.go).
		s.fb.trying = false
		e.host.Metrics.Add(MetricFallback, 1)
		v.Body = body
		s.replacedBody = true
	}
	if s.outMax >= 0 && req.Endpoint != llm.Embeddings && (!req.HasMaxTokens || s.outMax < req.MaxTokens) {
		// Budget reserve mode reserved for at most outMax output tokens:
		// the provider is held to it.
		if nb, changed := req.SetOutputMax(body, s.outMax); changed {
			body = nb
			v.Body = nb // its length: removed at gate 1, or set below when held
			s.replacedBody = true
			s.req.MaxTokens, s.req.HasMaxTokens = s.outMax, true
		}
	}
	if req.Stream && (req.Endpoint == llm.ChatCompletions || req.Endpoint == llm.Completions) && !req.IncludeUsage {
		if nb, changed := req.InjectIncludeUsage(body); changed {
			v.Body = nb // its length: removed at gate 1, or set below when held
			s.stripUsage = true
			s.replacedBody = true
		}
	}
	if s.held {
		// The headers leave with what the body decided.
		e.routeHeaders(s, &v)
	}
	v.Action = ActContinue
	s.forwarded = true
	e.noteStart(s)
	return v
}

// routeHeaders sets, on headers that waited for gate 2, what the body
// decided: the model and provider for routes to match on (the route is
// chosen again), and the final length of a body gate 2 rewrote (or no
// length, where the host cannot set it).
func (e *Engine) routeHeaders(s *Stream, v *Verdict) {
	set := e.setScratch[:0]
	if s.req.Model != "" {
		set = append(set, [2]string{wire.HeaderModel, s.req.Model})
	}
	if s.dims.Provider != "" {
		set = append(set, [2]string{wire.HeaderProvider, s.dims.Provider})
	}
	e.setScratch = set[:0]
	v.RouteHeaders = set
	v.ClearRoute = true
	if v.Body != nil && s.hadLength {
		v.Length = int64(len(v.Body))
	}
}

// checkSettled reads a budget_usd, quota_tokens or quota_requests instance
// from the accountant's snapshot; it writes nothing.
func (e *Engine) checkSettled(s *Stream, in *govern.Instance, now time.Time, v Verdict) *Verdict {
	if why := e.snapshotDistrust(now); why != "" {
		return e.uncheckable(s, in, v, why)
	}
	observed := e.observed(in, now)
	if observed < in.Amount && in.Limit.Fit && in.Limit.Type == govern.QuotaTokens {
		if reply := e.fitSettled(s, in, now, v, observed); reply != nil {
			return reply
		}
	}
	if observed < in.Amount {
		if why := e.fleetDistrust(); why != "" {
			// The other replicas' spend is as last read: under the cap on
			// what is known is not under the cap.
			return e.uncheckable(s, in, v, why)
		}
		// Under the cap by a count that may miss the rows this host
		// dropped: no refusal can be vouched for either way.
		if why := e.rowsDistrust(now); why != "" {
			return e.uncheckable(s, in, v, why)
		}
		return nil
	}
	return e.refuseSettled(s, in, now, v, observed)
}

// fleetDistrust says why the snapshot's fleet totals are only as last read
// (the accountant lost the fleet's shared Redis), or "".
func (e *Engine) fleetDistrust() string {
	if e.snapshotAt().IsZero() {
		return ""
	}
	return e.sync.loaded.fleet
}

// snapshotDistrust says why the spend snapshot cannot be read now (none
// yet, or older than seed 000's 30 s), or "" when it can.
func (e *Engine) snapshotDistrust(now time.Time) string {
	if e.snapshotAt().IsZero() {
		return wire.NoSnapshot
	}
	if age := now.Sub(e.snapshotAt()); age > snapshotTrust {
		return wire.StaleSnapshot(age, snapshotTrust)
	}
	return ""
}

// refuseSettled answers a spend or quota instance that is over with its
// 429 (resets and retry from the calendar), unless its posture admits it.
func (e *Engine) refuseSettled(s *Stream, in *govern.Instance, now time.Time, v Verdict, observed int64) *Verdict {
	return e.refuseSpend(s, in, now, v, observed, 0, false)
}

// refuseSpend is refuseSettled; held says the fleet's shared Redis decided
// it, where every replica's calls in flight are held (wire.Refusal.Held);
// inFlight, when positive, is what of observed the holds of calls in
// flight hold, without which the call would fit (heldInFlight): the
// refusal then names no reset time (wire.Refusal.InFlight).
func (e *Engine) refuseSpend(s *Stream, in *govern.Instance, now time.Time, v Verdict, observed, inFlight int64, held bool) *Verdict {
	if !e.over(s, in) {
		return nil
	}
	l := in.Limit
	r := e.settledRefusal(s, in, now, observed)
	r.Reserve = l.Reserve && l.Type == govern.BudgetUSD
	r.Replicas, r.Held, r.InFlight = e.replicas, held, inFlight
	return e.refuse(s, v, &r, in)
}

// settledRefusal is the refusal of a LedgerSettled instance whose counter
// for the period is observed: it resets when the period ends, or, for a
// rolling window, when the window falls under its amount (resetsAt).
func (e *Engine) settledRefusal(s *Stream, in *govern.Instance, now time.Time, observed int64) wire.Refusal {
	l := in.Limit
	resets := e.resetsAt(in, now)
	return wire.Refusal{
		RequestID:  s.id,
		LimitID:    l.ID,
		LimitType:  wire.LimitType(l.Type.String()),
		Node:       in.Node,
		Period:     l.Period.String(),
		ResetsAt:   resets,
		RetryAfter: wire.Seconds(resets.Sub(now)),
		Wait:       resets.Sub(now),
		Observed:   observed,
		Limit:      in.Amount,
	}
}

// observed is a LedgerSettled instance's counter for the current period: a
// snapshot entry from an earlier period counts as zero (the period rolled
// over and nothing has been folded into the new one yet).
func (e *Engine) observed(in *govern.Instance, now time.Time) int64 {
	return e.snapValue(in.ID, in, now)
}

// snapValue is the snapshot's value for id in the current period of in's
// limit, 0 when absent.
func (e *Engine) snapValue(id string, in *govern.Instance, now time.Time) int64 {
	if e.snapshotAt().IsZero() {
		return 0
	}
	ent := e.counter(id)
	p := in.Limit.Period
	if !ent.found {
		return 0
	}
	if p.Rolling > 0 {
		return e.windowValue(id, ent, p, now)
	}
	if ent.start != e.periodStart(p, now).Unix() {
		return 0
	}
	return ent.value
}

// periodStart is p.Start(now), from the engine's spans of the calendar
// periods met lately: a period's start in its zone costs about half a
// microsecond to work out in the guest, and every spend or quota instance
// of every request needs it. A span holds while now is inside it.
func (e *Engine) periodStart(p govern.Period, now time.Time) time.Time {
	ns := now.UnixNano()
	for i := range e.spans {
		if sp := &e.spans[i]; sp.end != 0 && ns >= sp.start.UnixNano() && ns < sp.end && sp.p == p {
			return sp.start
		}
	}
	start := p.Start(now)
	end := p.End(now)
	if start.IsZero() || end.IsZero() || !end.After(start) {
		return start // a window: no calendar span
	}
	sp := &e.spans[e.spanNext%uint8(len(e.spans))]
	e.spanNext++
	*sp = periodSpan{p: p, start: start, end: end.UnixNano()}
	return start
}

// periodSpan is one calendar period's current span: [start, end).
type periodSpan struct {
	p     govern.Period
	start time.Time
	end   int64 // unix ns; 0: an empty slot
}

// checkTPM reserves the request's estimated tokens on the instance's cell
// (the tokens its metric counts); with fit, a reserve the window cannot
// hold whole is lowered to what it holds (fitTPM).
func (e *Engine) checkTPM(s *Stream, in *govern.Instance, now time.Time, v Verdict) *Verdict {
	l := in.Limit
	p := e.rateParams(in)
	cost := tpmReserve(l, s.req)
	if why := e.storeDistrust(l.Store); why != "" {
		if reply := e.uncheckable(s, in, v, why); reply != nil {
			return reply
		}
	}
	res, err := e.cells.rateTake(in.CellKey(), l.Algorithm, now, cost, p)
	if err != nil {
		return e.uncheckable(s, in, v, "its shared-data cell could not be updated: "+err.Error())
	}
	if !res.Allowed && l.Fit {
		return e.fitTPM(s, in, now, v, p)
	}
	return e.tpmJudged(s, in, now, v, rateDecision{res: res}, cost, in.CellKey())
}

// checkLeasedTPM reserves the request's estimated tokens on the replica's
// lease of a store: redis tpm instance at position i, and may wait for
// one.
func (e *Engine) checkLeasedTPM(s *Stream, in *govern.Instance, i int, now time.Time, v Verdict) (*Verdict, bool) {
	e.seeLease(leaseKey(kindRate, in.CellKey()), in)
	cost := tpmReserve(in.Limit, s.req)
	d := e.leaseRate(s, in, i, cost, now, v)
	if d.wait || d.reply != nil {
		return d.reply, d.wait
	}
	cell := ""
	if d.share {
		cell = shareKey(in.CellKey())
	}
	return e.tpmJudged(s, in, now, v, d, cost, cell), false
}

// tpmJudged carries out a tpm reserve's decision: the reserve recorded (in
// the fleet's lot d.lot, or in the shared-data cell named cell) and
// disclosed, or the 429.
func (e *Engine) tpmJudged(s *Stream, in *govern.Instance, now time.Time, v Verdict, d rateDecision, cost int64, cell string) *Verdict {
	l := in.Limit
	p := e.rateParams(in)
	res := d.res
	if res.Allowed {
		s.reserves = append(s.reserves, reserve{key: in.CellKey(), id: leaseID(in), metric: l.Metric, alg: l.Algorithm, params: p, amount: cost, lot: d.lot, cell: cell})
		disclose(&s.disclosure.Tokens, l, p, res.Remaining)
		if len(l.Thresholds) > 0 {
			used := res.Limit - res.Remaining
			e.gateAlerts(in, used-cost, used, res.Limit, now)
		}
		return nil
	}
	if !e.over(s, in) {
		disclose(&s.disclosure.Tokens, l, p, res.Remaining) // admitted over its cap: still advertised
		return nil
	}
	r := wire.Refusal{
		RequestID:  s.id,
		LimitID:    l.ID,
		LimitType:  wire.TPM,
		Node:       in.Node,
		Period:     l.Period.String(),
		RetryAfter: wire.Seconds(res.RetryAfter),
		Wait:       res.RetryAfter,
	}
	if res.Unfittable {
		r.Unfittable, r.Cost, r.Burst = true, cost, res.Limit
	}
	return e.refuse(s, v, &r, in)
}

// returnReserves gives back every tpm reserve of a request refused before
// it was forwarded: into the lot or the cell it was taken from.
func (e *Engine) returnReserves(s *Stream, now time.Time) {
	for _, r := range s.reserves {
		switch {
		case r.lot != 0:
			e.returnLeased(r, now)
		case r.cell != "":
			if err := e.cells.rateAdjust(r.cell, r.alg, now, -r.amount, r.params); err != nil {
				e.logf(LogWarn, "returning a tpm reserve on %s: %v (it drains with the window)", r.cell, err)
			}
		}
	}
	s.reserves = s.reserves[:0]
}

// modelAllowed checks a model against a key's model scope (path.Match
// patterns, as match.model).
func modelAllowed(patterns []string, model string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, model); ok || p == model {
			return true
		}
	}
	return false
}
