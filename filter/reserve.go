package filter

import (
	"math"
	"strconv"
	"time"

	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/llm"
	"github.com/tokentriage/tokentriage/shared/pricing"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// Budget reserve mode (a budget_usd limit with reserve: true). The
// default class reads the accountant's snapshot and writes nothing, so a
// burst admitted before any of it is folded passes the cap. In reserve mode
// the replica also counts its own spend as it happens: admission reserves
// the dearest cost the call can reach (every byte of the body an input
// token, the output maximum, lowered to fit what is left, in output
// tokens, at the accountant's rates) in a shared-data cell per instance,
// and settlement corrects it to the call's cost. What the replica may
// spend is then
//
//	amount − (snapshot total − snapshot of this replica's rows) − this replica's spend
//
// which holds the cap within one replica: every call this replica admitted
// is in its own spend the moment it is admitted, and what the other
// replicas spent arrives with the snapshot.
//
// The cell: spendKey(instance) → i64 period start (unix s) | i64 nanodollars.

func spendKey(id string) string { return "tt/spend|" + id }

// spendReserve is one reservation a stream holds, settled once.
type spendReserve struct {
	key    string
	start  int64 // the period it was taken in
	amount int64 // nanodollars reserved
	rates  pricing.Rates
}

// priceOf is the rates of a model from the accountant's catalog.
func (e *Engine) priceOf(model string) (pricing.Rates, bool) {
	return pricing.Lookup(model, func(n string) (pricing.Rates, bool) {
		r, ok := e.prices[n]
		return r, ok
	})
}

// checkReserve admits a call against a reserve-mode budget instance: it
// reserves the call's dearest cost, lowering the output maximum (s.outMax)
// so that it fits what is left, or refuses when not even one output token
// fits.
func (e *Engine) checkReserve(s *Stream, in *govern.Instance, now time.Time, v Verdict) *Verdict {
	l := in.Limit
	if why := e.snapshotDistrust(now); why != "" {
		return e.uncheckable(s, in, v, why)
	}
	start := calendar.Start(l.Period.Calendar, now).Unix()
	snapMine := e.snapValue(in.ID+syncwire.ReplicaSuffix+e.replica, in, now)
	others := e.othersSpent(in, now, snapMine)
	rates, priced := e.priceOf(s.req.Model)
	var why string
	switch {
	case !priced:
		why = "the model " + strconv.Quote(s.req.Model) + " has no price in the accountant's catalog, so the dearest cost of the call cannot be reserved"
	case s.req.RemoteInput:
		why = "the call's input is not all in its body (a stored response, conversation or prompt, or a tool that retrieves server-side), so its dearest cost cannot be bounded"
	}
	input := int64(s.bodySize) // a token is at least one byte of the body
	outCap := s.outMax         // lowered by a reserve before this one
	if outCap < 0 {
		outCap = outputCap(s.req)
	}
	key := spendKey(in.CellKey())
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		val, cas, found, err := e.cells.store.Get(key)
		if err != nil {
			return e.uncheckable(s, in, v, "its shared-data spend cell could not be read: "+err.Error())
		}
		// This replica's spend: its cell, or what the accountant has folded
		// from its rows when that is more (a cell that started after the
		// period did: reserve turned on by a reload, or back on).
		mine := snapMine
		cell, readable := decodeSpend(val)
		if !found || !readable || cell.start != start {
			cell = spendCell{start: start}
		}
		settledMine := max(mine, cell.settled)
		mine = max(mine, cell.total(now))
		avail := in.Amount - others - mine
		// A call that cannot be bounded is uncheckable, but a budget
		// already spent still refuses it, as the default class would.
		if why != "" && avail > 0 {
			return e.uncheckable(s, in, v, why)
		}
		out, cost, fits := fitOutput(rates, input, s.req.Choices, outCap, avail)
		if why != "" || fits && l.Fit && out < min(l.MinOutput, outCap) {
			// fit: true lets a call through with min_output at the least.
			fits = false
		}
		if !fits {
			inFlight := int64(0)
			if why == "" {
				inFlight = e.heldInFlight(s, in, others+mine, mine-settledMine)
			}
			return e.refuseSpend(s, in, now, v, others+mine, inFlight, false)
		}
		e.cells.scratch = cell.hold(e.vm, cost, now, e.leaseTTL).appendTo(e.cells.scratch[:0])
		swapped, err := e.cells.setNew(key, e.cells.scratch, cas, found)
		if err != nil {
			return e.uncheckable(s, in, v, "its shared-data spend cell could not be updated: "+err.Error())
		}
		if !swapped {
			e.cells.retries++
			continue
		}
		s.spend = append(s.spend, spendReserve{key: key, start: start, amount: cost, rates: rates})
		e.noteSpendHold(key, cost)
		if s.outMax < 0 || out < s.outMax {
			s.outMax = out
		}
		if why := e.fleetDistrust(); why != "" {
			// This replica's part holds; the others' is as last read.
			return e.uncheckable(s, in, v, why)
		}
		return nil
	}
	return e.uncheckable(s, in, v, errContention.Error())
}

// othersSpent is what a reserve-mode budget's counter holds beyond this
// replica's own folded spend (snapMine): the other replicas' spend. The
// counter is served less the resets and credits taken off it
// (syncwire.CreditSuffix), which may take off more than the others spent:
// the figure is then below zero, and the rest comes off this replica's
// own spend, which it counts itself.
func (e *Engine) othersSpent(in *govern.Instance, now time.Time, snapMine int64) int64 {
	return e.observed(in, now) - snapMine
}

// heldInFlight returns inFlight, what of a reserve-mode budget's spend
// (observed) the holds of calls in flight hold, when the call refused
// would fit without them: what refuses it then comes back as those calls
// settle, at no time a clock can name. Otherwise 0: the budget's settled
// spend alone leaves no room for the call, and it resets with the period.
func (e *Engine) heldInFlight(s *Stream, in *govern.Instance, observed, inFlight int64) int64 {
	if inFlight <= 0 {
		return 0
	}
	rates, priced := e.priceOf(s.req.Model)
	if !priced {
		return 0
	}
	outCap := s.outMax
	if outCap < 0 {
		outCap = outputCap(s.req)
	}
	if _, _, fits := fitOutput(rates, int64(s.bodySize), s.req.Choices, outCap, in.Amount-(observed-inFlight)); !fits {
		return 0
	}
	return inFlight
}

// outputCap is the most output a call may produce before any reserve
// lowers it: its own maximum, or 16,384 (the tpm reserve's cap) when it set
// none; 0 for embeddings, which produce none.
func outputCap(r llm.Request) int64 {
	switch {
	case r.Endpoint == llm.Embeddings:
		return 0
	case r.HasMaxTokens && r.MaxTokens >= 0:
		return r.MaxTokens
	}
	return llm.ReserveCap
}

// fitOutput finds the largest output maximum, at most outCap, whose
// dearest cost (input tokens, and choices completions of that many output
// tokens each) fits in avail, and that cost. A call with output (outCap >
// 0) needs room for at least one output token per choice.
func fitOutput(r pricing.Rates, input, choices, outCap, avail int64) (out, cost int64, ok bool) {
	choices = max(choices, 1)
	dear := func(n int64) int64 { return dearCost(r, input, choices, n) }
	if c := dear(outCap); c <= avail {
		return outCap, c, true
	}
	if outCap == 0 || dear(1) > avail {
		return 0, 0, false
	}
	lo, hi := int64(1), outCap // dear(lo) fits, dear(hi) does not
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if dear(mid) <= avail {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, dear(lo), true
}

// dearCost is the cost of a call of input tokens and choices completions
// of n output tokens each.
func dearCost(r pricing.Rates, input, choices, n int64) int64 {
	choices = max(choices, 1)
	return pricing.Cost(r, ledger.Usage{Input: input, Output: min(n, math.MaxInt64/choices) * choices})
}

// settleSpend corrects the stream's reservations to the call's cost: the
// usage at the served model's rates when the catalog has them (as the
// accountant prices the row), else at the rates reserved with; nothing
// when the call was not forwarded.
func (e *Engine) settleSpend(s *Stream, forwarded bool, now time.Time) {
	for _, sp := range s.spend {
		actual := int64(0)
		if forwarded {
			rates := sp.rates
			if r, ok := e.priceOf(s.served); ok && s.served != "" {
				rates = r
			}
			actual = pricing.Cost(rates, s.usage)
		}
		e.noteSpendHold(sp.key, -sp.amount)
		if err := e.adjustSpend(sp, actual, now); err != nil {
			e.logf(LogWarn, "settling a budget reserve on %s: %v", sp.key, err)
		}
	}
	s.spend = s.spend[:0]
}

// adjustSpend settles a reservation in the cell: the call's cost goes to
// the settled spend and the reservation leaves this VM's hold, if the cell
// still counts the period the reservation was taken in.
func (e *Engine) adjustSpend(sp spendReserve, actual int64, now time.Time) error {
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		val, cas, found, err := e.cells.store.Get(sp.key)
		if err != nil {
			return err
		}
		cell, ok := decodeSpend(val)
		if !found || !ok || cell.start != sp.start {
			return nil // a new period: the reservation went with the old one
		}
		cell.settled = max(addSpend(cell.settled, actual), 0)
		cell = cell.hold(e.vm, -sp.amount, now, e.leaseTTL)
		e.cells.scratch = cell.appendTo(e.cells.scratch[:0])
		swapped, err := e.cells.setNew(sp.key, e.cells.scratch, cas, true)
		if err != nil {
			return err
		}
		if swapped {
			return nil
		}
		e.cells.retries++
	}
	return errContention
}

// spendMine is this replica's spend on a reserve-mode instance in the
// current period (for /tt/v1/me).
func (e *Engine) spendMine(in *govern.Instance, now time.Time) int64 {
	val, _, found, err := e.cells.store.Get(spendKey(in.CellKey()))
	if err != nil || !found {
		return 0
	}
	cell, ok := decodeSpend(val)
	if !ok || cell.start != calendar.Start(in.Limit.Period.Calendar, now).Unix() {
		return 0
	}
	return cell.total(now)
}

// noteSpendHold keeps the reservations this VM holds per spend cell, whose
// expiry its tick pushes forward (refreshSpendHolds).
func (e *Engine) noteSpendHold(key string, delta int64) {
	if e.spendHeld == nil {
		e.spendHeld = map[string]int64{}
	}
	if n := e.spendHeld[key] + delta; n > 0 {
		e.spendHeld[key] = n
	} else {
		delete(e.spendHeld, key)
	}
}

// refreshSpendHolds pushes forward the expiry of this VM's hold on every
// spend cell it holds reservations in. Called from the tick.
func (e *Engine) refreshSpendHolds(now time.Time) {
	for key := range e.spendHeld {
		for attempt := 0; attempt < maxCASRetries; attempt++ {
			val, cas, found, err := e.cells.store.Get(key)
			if err != nil || !found {
				break
			}
			cell, ok := decodeSpend(val)
			if !ok {
				break
			}
			e.cells.scratch = cell.hold(e.vm, 0, now, e.leaseTTL).appendTo(e.cells.scratch[:0])
			if swapped, err := e.cells.setNew(key, e.cells.scratch, cas, true); err != nil || swapped {
				break
			}
			e.cells.retries++
		}
	}
}
