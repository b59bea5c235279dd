package filter

import (
	"github.com/tokentriage/tokentriage/shared/jsontok"
	"strconv"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/pricing"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// Gate 2 and the fleet's Redis. Two kinds of gate-2 instance are decided
// there: store: redis tpm (a reserve in the fleet's rate cell), and, when
// the accountant has the fleet's shared Redis, every budget in reserve
// mode (reserve: true): the call holds its dearest cost against the
// fleet's spend (every accountant's published total plus every live hold
// of every replica), atomically in one script, so the cap holds across the
// fleet, not only per replica. A hold lives under the request's id until
// the accountant that records the call's row releases it (raising its
// published total by the call's cost in the same step), the request is
// refused (released at once), or its lease lapses (lease_ttl, seed 003's
// 15 minutes: a lost replica's holds stop holding).
//
// Like gate 1 (fleetPrefix), one callout asks about every such instance
// before the first local instance that would refuse now (read, not
// written); the walk then runs in seed 004 order on the answer, so the
// first instance over names the refusal whatever store it uses, and what
// the others took is handed back.

// fleetHoldable reports whether the budget instance in (reserve mode, on)
// holds in the fleet's Redis for this request: the accountant has Redis,
// and the call's dearest cost can be priced.
func (e *Engine) fleetHoldable(s *Stream, in *govern.Instance) bool {
	if in.Limit.Type != govern.BudgetUSD || !e.fleetStore || e.host.Caller == nil || s.req.RemoteInput {
		return false
	}
	_, priced := e.priceOf(s.req.Model)
	return priced
}

// fleetDecides2 reports whether the fleet's Redis decides gate-2 instance
// in.
func (e *Engine) fleetDecides2(s *Stream, in *govern.Instance) bool {
	l := in.Limit
	switch {
	case l.Type == govern.TPM || l.Type == govern.RPM:
		return e.fleetRate(in)
	case l.Reserve && l.Mode == govern.ModeOn:
		return e.fleetHoldable(s, in)
	}
	return false
}

// fleetPrefix2 returns the positions of the gate-2 instances the fleet
// decides that come before the first local instance that would refuse
// now.
func (e *Engine) fleetPrefix2(s *Stream, insts []govern.Instance, now time.Time) []int {
	first := -1
	for i := range insts {
		if e.fleetDecides2(s, &insts[i]) {
			first = i
			break
		}
	}
	if first < 0 {
		return nil
	}
	asked := e.asked[:0]
	for i := range insts {
		in := &insts[i]
		if e.fleetDecides2(s, in) {
			asked = append(asked, i)
			continue
		}
		if i > first && e.wouldRefuse2(s, in, now) {
			break // the walk stops here; nothing after it counts
		}
		if i < first && e.wouldRefuse2(s, in, now) {
			return nil // refused before the fleet is reached: nothing to ask
		}
	}
	e.asked = asked[:0]
	return asked
}

// wouldRefuse2 reads (never writes) whether the local gate-2 instance in
// would refuse the request now.
func (e *Engine) wouldRefuse2(s *Stream, in *govern.Instance, now time.Time) bool {
	l := in.Limit
	if l.Mode != govern.ModeOn || l.Enforce != govern.EnforceHard {
		return false
	}
	switch {
	case l.Type == govern.TPM:
		res, err := e.cells.rateWouldTake(in.CellKey(), l.Algorithm, now, tpmReserve(l, s.req), e.rateParams(in))
		return err == nil && !res.Allowed
	case l.Type == govern.RPM:
		res, err := e.cells.rateWouldTake(in.CellKey(), l.Algorithm, now, 1, e.rateParams(in))
		return err == nil && !res.Allowed
	case l.Type == govern.Concurrency:
		live, err := e.cells.gaugeRead(in.CellKey(), now)
		return err == nil && live >= e.shareCap(in.Amount, l.Store)
	case e.snapshotDistrust(now) != "":
		return false
	case l.Reserve:
		rates, priced := e.priceOf(s.req.Model)
		if !priced {
			return false
		}
		snapMine := e.snapValue(in.ID+syncwire.ReplicaSuffix+e.replica, in, now)
		others := e.othersSpent(in, now, snapMine)
		mine := max(snapMine, e.spendMine(in, now))
		outCap := s.outMax
		if outCap < 0 {
			outCap = outputCap(s.req)
		}
		_, _, fits := fitOutput(rates, int64(s.bodySize), s.req.Choices, outCap, in.Amount-others-mine)
		return !fits
	}
	return e.observed(in, now) >= in.Amount
}

// askGate2 asks the accountant about the gate-2 instances at asked, in
// one callout, and pauses the request at its body; the walk runs on the
// answer. false when the callout cannot be made (s.fleet says why).
func (e *Engine) askGate2(s *Stream, insts []govern.Instance, asked []int, body []byte, v Verdict) (Verdict, bool) {
	f := &s.fleet
	f.reset()
	f.inst = append(f.inst, insts...)
	f.asked = append(f.asked, asked...)
	f.at = e.host.Now()
	b := append(e.buf[:0], `{"request_id":`...)
	b = jsontok.AppendString(b, s.id)
	b = append(b, `,"rate":[`...)
	for k, i := range asked {
		if k > 0 {
			b = append(b, ',')
		}
		in := &insts[i]
		switch in.Limit.Type {
		case govern.RPM:
			b = appendRateStep(b, in, 1)
		case govern.TPM:
			b = appendRateStep(b, in, tpmReserve(in.Limit, s.req))
		default:
			b = e.appendHoldStep(b, s, in, f.at)
		}
	}
	b = append(b, "]}"...)
	e.buf = b[:0]
	gen := s.gen
	// The body is the engine's chunk buffer, valid only in this callback:
	// the request keeps its own copy while it waits.
	s.body = append(s.body[:0], body...)
	err := e.host.Caller.Call("POST", syncwire.AdmitPath, jsonHeaders, b, e.fleetTimeout(), func(status int, answer []byte) {
		if s.gen != gen || !s.fleet.pending {
			return // the request ended while it waited
		}
		s.fleet.pending = false
		e.fleetAnswered(s, status, answer)
		s.wake(e.gate2Walk(s, s.fleet.inst, s.body, e.host.Now(), Verdict{}))
	})
	if err != nil {
		f.done, f.why = true, "the accountant could not be called: "+err.Error()
		e.noteFleet(f.why)
		return Verdict{}, false
	}
	f.pending, f.sent = true, true
	v.Action = ActPause
	return v, true
}

// appendHoldStep appends the syncwire.RateStep of a budget hold on in: the
// call's dearest cost (every byte of its body an input token, its output
// maximum) and the least it can be lowered to (one output token).
func (e *Engine) appendHoldStep(dst []byte, s *Stream, in *govern.Instance, at time.Time) []byte {
	rates, _ := e.priceOf(s.req.Model)
	input, choices := int64(s.bodySize), s.req.Choices
	outCap := outputCap(s.req)
	dear := dearCost(rates, input, choices, outCap)
	least := dear
	if outCap > 0 {
		n := int64(1)
		if in.Limit.Fit {
			n = min(in.Limit.MinOutput, outCap) // fit: true lets a call through with min_output at the least
		}
		least = dearCost(rates, input, choices, n)
	}
	unit := in.Limit.Period.Calendar
	dst = append(dst, `{"id":`...)
	dst = jsontok.AppendString(dst, in.ID)
	dst = append(dst, `,"alg":"hold","amount":`...)
	dst = strconv.AppendInt(dst, in.Amount, 10)
	dst = append(dst, `,"period_ns":0,"burst":0,"n":`...)
	dst = strconv.AppendInt(dst, dear, 10)
	dst = append(dst, `,"least":`...)
	dst = strconv.AppendInt(dst, least, 10)
	dst = append(dst, `,"unit":"`...)
	dst = append(dst, unit.String()...)
	dst = append(dst, `","start":`...)
	dst = strconv.AppendInt(dst, calendar.Start(unit, at).Unix(), 10)
	dst = append(dst, `,"lease_ns":`...)
	dst = strconv.AppendInt(dst, int64(e.leaseTTL), 10)
	return append(dst, '}')
}

// notDecided says why the fleet did not decide position i.
func notDecided(f *fleetAsk, i int) string {
	switch {
	case !f.wasAsked(i):
		return "the fleet store (shared Redis) was not asked: a limit before it was over when the request arrived"
	case f.why != "":
		return f.why
	}
	return "the fleet store (shared Redis) did not answer for it"
}

// checkFleetTPM carries out the fleet's answer to a store: redis tpm
// reserve, or, where Redis did not decide, the local cell's (and the
// request says suspended).
func (e *Engine) checkFleetTPM(s *Stream, in *govern.Instance, i int, now time.Time, v Verdict) *Verdict {
	cost := tpmReserve(in.Limit, s.req)
	res, ok := s.fleet.result(i)
	if !ok {
		if reply := e.uncheckable(s, in, v, notDecided(&s.fleet, i)); reply != nil {
			return reply
		}
		var err error
		res, err = e.cells.rateTake(in.CellKey(), in.Limit.Algorithm, now, cost, e.rateParams(in))
		if err != nil {
			return e.uncheckable(s, in, v, "its shared-data cell could not be updated: "+err.Error())
		}
	}
	return e.tpmJudged(s, in, now, v, res, cost, ok)
}

// checkFleetHold carries out the fleet's answer to a budget hold: the
// output maximum lowered to what the hold pays for, or the 429 with the
// fleet's spend; where Redis did not decide, the replica's own reserve
// (checkReserve), and the request says suspended.
func (e *Engine) checkFleetHold(s *Stream, in *govern.Instance, i int, now time.Time, v Verdict) *Verdict {
	res, ok := s.fleet.result(i)
	if !ok {
		if s.fleet.sent && s.fleet.wasAsked(i) {
			// The question left but no answer decided it: the answer
			// missed the deadline, or the accountant's own wait on Redis
			// ran out, and the script may have taken the hold all the
			// same. The request names it as if held, so that its release
			// (on a refusal) or its row frees it, instead of it holding
			// the fleet's budget beside the call's own cost until its
			// lease lapses; Redis releasing a hold it never took finds
			// nothing.
			s.holds = append(s.holds, holdRef(in, s.fleet.at))
		}
		if reply := e.uncheckable(s, in, v, notDecided(&s.fleet, i)); reply != nil {
			return reply
		}
		return e.checkReserve(s, in, now, v)
	}
	held, used, inFlight := s.fleet.hold(i)
	if !res.Allowed {
		return e.refuseSpend(s, in, now, v, used, e.heldInFlight(s, in, used, inFlight), true)
	}
	unit := in.Limit.Period.Calendar
	if held > 0 {
		s.holds = append(s.holds, holdRef(in, s.fleet.at))
	}
	rates, _ := e.priceOf(s.req.Model)
	outCap := s.outMax // lowered by a reserve before this one
	if outCap < 0 {
		outCap = outputCap(s.req)
	}
	out, cost, fits := fitOutput(rates, int64(s.bodySize), s.req.Choices, outCap, held)
	if !fits {
		// The catalog's rates rose while the request waited: what the
		// fleet holds no longer pays for one output token.
		return e.refuseSpend(s, in, now, v, addSpend(used, held), 0, true)
	}
	// The replica's cell counts the call too: its own spend on /tt/v1/me,
	// and what the replica answers with while Redis cannot.
	if err := e.addSpendHold(s, in, calendar.Start(unit, now).Unix(), cost, rates, now); err != nil {
		e.logf(LogWarn, "recording a budget hold in the replica's spend cell %s: %v", spendKey(in.CellKey()), err)
	}
	if s.outMax < 0 || out < s.outMax {
		s.outMax = out
	}
	return nil
}

// holdRef names the fleet hold of in asked at at, as a row's holds do:
// "<unit> <period start> <counter identity>".
func holdRef(in *govern.Instance, at time.Time) string {
	unit := in.Limit.Period.Calendar
	return unit.String() + " " + strconv.FormatInt(calendar.Start(unit, at).Unix(), 10) + " " + in.ID
}

// addSpendHold adds cost to this VM's hold in the replica's spend cell of
// in, settled with the call (settleSpend).
func (e *Engine) addSpendHold(s *Stream, in *govern.Instance, start, cost int64, rates pricing.Rates, now time.Time) error {
	key := spendKey(in.CellKey())
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		val, cas, found, err := e.cells.store.Get(key)
		if err != nil {
			return err
		}
		cell, ok := decodeSpend(val)
		if !found || !ok || cell.start != start {
			cell = spendCell{start: start}
		}
		e.cells.scratch = cell.hold(e.vm, cost, now, e.leaseTTL).appendTo(e.cells.scratch[:0])
		swapped, err := e.cells.setNew(key, e.cells.scratch, cas, found)
		if err != nil {
			return err
		}
		if swapped {
			s.spend = append(s.spend, spendReserve{key: key, start: start, amount: cost, rates: rates})
			e.noteSpendHold(key, cost)
			return nil
		}
		e.cells.retries++
	}
	return errContention
}

// releaseFleetHolds gives back the fleet holds of a request refused at
// gate 2, in one callout; the row names them too, and the accountant that
// records it releases whatever this missed (once, by request id).
func (e *Engine) releaseFleetHolds(s *Stream) {
	if len(s.holds) == 0 || e.host.Caller == nil {
		return
	}
	b := append(make([]byte, 0, 128), `{"request_id":`...)
	b = jsontok.AppendString(b, s.id)
	b = append(b, `,"release":[`...)
	for k, h := range s.holds {
		unit, rest, _ := strings.Cut(h, " ")
		start, id, _ := strings.Cut(rest, " ")
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = jsontok.AppendString(b, id)
		b = append(b, `,"unit":"`...)
		b = append(b, unit...)
		b = append(b, `","start":`...)
		b = append(b, start...)
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	if err := e.host.Caller.Call("POST", syncwire.AdmitPath, jsonHeaders, b, e.callTimeout(), func(int, []byte) {}); err != nil {
		e.logf(LogWarn, "releasing budget holds in the fleet store: %v (the accountant releases them with the row, or they lapse with their lease)", err)
	}
}
