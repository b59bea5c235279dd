package filter

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/llm"
	"github.com/tokentriage/tokentriage/shared/pricing"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// Reserve mode (reserve: true on budget_usd, quota_tokens or
// quota_requests). The default class reads the accountant's snapshot and
// writes nothing, so a burst admitted before any of it is folded passes the
// cap. In reserve mode the replica also counts its own use as it happens:
// admission reserves the most the call can cost (budget_usd: every byte of
// the body an input token and the output maximum, at the accountant's
// rates; quota_tokens: the same in tokens; quota_requests: one request),
// lowering the call's output maximum to fit what is left (seed 003's usage
// ceiling), and settlement corrects it to what the call cost. What the
// replica may use is then
//
//	amount − (snapshot total − snapshot of this replica's rows) − this replica's use
//
// which holds the cap within one replica: every call this replica admitted
// is in its own use the moment it is admitted, and what the other replicas
// used arrives with the snapshot. With the fleet's Redis the replica
// decides on a lease of the fleet's amount instead (leasespend.go), which
// holds the cap across the fleet.
//
// The cell: spendKey(instance) → i64 period start (unix s) | i64 settled
// | the holds of calls in flight (spendcell.go).

func spendKey(id string) string { return "tt/spend|" + id }

// spendReserve is one reservation a stream holds, settled once.
type spendReserve struct {
	key    string
	typ    govern.Type
	start  int64 // the period it was taken in
	amount int64 // reserved, in the limit's unit
	rates  pricing.Rates
	// lease: the reservation is a hold on the replica's lease of the
	// fleet's amount (leasespend.go), not in its own spend cell.
	lease bool
}

// priceOf is the rates of a model from the accountant's catalog.
func (e *Engine) priceOf(model string) (pricing.Rates, bool) {
	return pricing.Lookup(model, func(n string) (pricing.Rates, bool) {
		r, ok := e.prices[n]
		return r, ok
	})
}

// spendAsk is what a call can cost on a reserve-mode instance: its type's
// arithmetic, the call's rates (budget_usd), its input bound (every byte
// of the body a token), its completions and its output maximum so far.
type spendAsk struct {
	typ     govern.Type
	metric  govern.Metric // quota_tokens: which tokens count
	rates   pricing.Rates
	input   int64
	choices int64
	outCap  int64
	// minOut is the least output a call is let through with: one token,
	// or min_output under fit: true.
	minOut int64
}

// dear is the call's cost with n output tokens per completion.
func (m spendAsk) dear(n int64) int64 {
	choices := max(m.choices, 1)
	out := min(n, math.MaxInt64/choices) * choices
	switch m.typ {
	case govern.QuotaRequests:
		return 1
	case govern.QuotaTokens:
		switch m.metric {
		case govern.MetricInput:
			return m.input
		case govern.MetricOutput:
			return out
		}
		return addSpend(m.input, out)
	}
	return pricing.Cost(m.rates, ledger.Usage{Input: m.input, Output: out})
}

// most is the call's dearest cost, least its cost lowered to its least
// output (minOut, or its own maximum when lower) per completion (the same
// when it has no output to lower).
func (m spendAsk) most() int64 { return m.dear(m.outCap) }

func (m spendAsk) least() int64 {
	if m.outCap > 0 {
		return m.dear(min(max(m.minOut, 1), m.outCap))
	}
	return m.dear(0)
}

// fit finds the largest output maximum, at most outCap, whose dearest cost
// fits in avail, and that cost. A call with output (outCap > 0) needs room
// for its least output per completion (one token, or min_output under fit:
// true).
func (m spendAsk) fit(avail int64) (out, cost int64, ok bool) {
	out, cost, ok = fitOutputBy(m.dear, m.outCap, avail)
	if ok && out < min(max(m.minOut, 1), m.outCap) {
		return 0, 0, false
	}
	return out, cost, ok
}

// fitOutputBy finds the largest output maximum n, at most outCap, whose
// cost dear(n) fits in avail, and that cost: the one search every limit
// that lowers a call's output maximum to what it has left uses. A call
// with output (outCap > 0) needs room for at least one output token.
func fitOutputBy(dear func(n int64) int64, outCap, avail int64) (out, cost int64, ok bool) {
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

// spendAskOf is the call's spendAsk on instance in, or why its cost cannot
// be bounded ("" when it can).
func (e *Engine) spendAskOf(s *Stream, in *govern.Instance) (spendAsk, string) {
	m := spendAsk{typ: in.Limit.Type, metric: in.Limit.Metric, input: int64(s.bodySize), choices: s.req.Choices, outCap: s.outMax, minOut: 1}
	if in.Limit.Fit {
		m.minOut = in.Limit.MinOutput // fit: true lets a call through with min_output at the least
	}
	if m.outCap < 0 {
		m.outCap = outputCap(s.req)
	}
	if m.typ == govern.BudgetUSD {
		rates, priced := e.priceOf(s.req.Model)
		if !priced {
			return m, "the model " + strconv.Quote(s.req.Model) + " has no price in the accountant's catalog, so the dearest cost of the call cannot be reserved"
		}
		m.rates = rates
	}
	if s.req.RemoteInput && m.typ != govern.QuotaRequests {
		return m, "the call's input is not all in its body (a stored response, conversation or prompt, or a tool that retrieves server-side), so its dearest cost cannot be bounded"
	}
	return m, ""
}

// checkReserve admits a call against a reserve-mode instance on this
// replica alone (no fleet Redis): it reserves the call's dearest cost,
// lowering the output maximum (s.outMax) so that it fits what is left, or
// refuses when not even one output token fits.
func (e *Engine) checkReserve(s *Stream, in *govern.Instance, now time.Time, v Verdict) *Verdict {
	l := in.Limit
	if why := e.snapshotDistrust(now); why != "" {
		return e.uncheckable(s, in, v, why)
	}
	start := e.periodStart(l.Period, now).Unix()
	snapMine := e.snapValue(in.ID+syncwire.ReplicaSuffix+e.replica, in, now)
	others := e.othersSpent(in, now, snapMine)
	m, why := e.spendAskOf(s, in)
	key := spendKey(in.CellKey())
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		val, cas, found, err := e.cells.store.Get(key)
		if err != nil {
			return e.uncheckable(s, in, v, "its shared-data spend cell could not be read: "+err.Error())
		}
		// This replica's use: its cell, or what the accountant has folded
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
		// A call that cannot be bounded is uncheckable, but a limit
		// already used up still refuses it, as the default class would.
		if why != "" && avail > 0 {
			return e.uncheckable(s, in, v, why)
		}
		out, cost, fits := m.fit(avail)
		if why != "" {
			fits = false
		}
		if !fits {
			inFlight := int64(0)
			if why == "" {
				inFlight = heldInFlight(m, in.Amount, others+mine, mine-settledMine)
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
		s.spend = append(s.spend, spendReserve{key: key, typ: l.Type, start: start, amount: cost, rates: m.rates})
		e.noteSpendHold(key, cost)
		e.lowerOutput(s, out)
		if why := e.fleetDistrust(); why != "" {
			// This replica's part holds; the others' is as last read.
			return e.uncheckable(s, in, v, why)
		}
		return nil
	}
	return e.uncheckable(s, in, v, errContention.Error())
}

// othersSpent is what a reserve-mode counter holds beyond this replica's
// own folded use (snapMine): the other replicas' use. The counter is
// served less the resets and credits taken off it (syncwire.CreditSuffix),
// which may take off more than the others used: the figure is then below
// zero, and the rest comes off this replica's own use, which it counts
// itself.
func (e *Engine) othersSpent(in *govern.Instance, now time.Time, snapMine int64) int64 {
	return e.observed(in, now) - snapMine
}

// lowerOutput holds the call to out output tokens (per completion) when
// that is below what it may produce so far.
func (e *Engine) lowerOutput(s *Stream, out int64) {
	if s.outMax < 0 || out < s.outMax {
		s.outMax = out
	}
}

// heldInFlight returns inFlight, what of a reserve-mode limit's use
// (observed) the holds of calls in flight hold, when the call refused
// would fit without them: what refuses it then comes back as those calls
// settle, at no time a clock can name. Otherwise 0: the settled use alone
// leaves no room for the call, and it resets with the period.
func heldInFlight(m spendAsk, amount, observed, inFlight int64) int64 {
	if inFlight <= 0 {
		return 0
	}
	if _, _, fits := m.fit(amount - (observed - inFlight)); !fits {
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

// spendActual is what a call settled for in a reservation's unit: its
// usage at the served model's rates when the catalog has them (as the
// accountant prices the row), else at the rates reserved with; its tokens;
// one request. Nothing when it was not forwarded.
func (e *Engine) spendActual(s *Stream, sp spendReserve, forwarded bool) int64 {
	if !forwarded {
		return 0
	}
	switch sp.typ {
	case govern.QuotaRequests:
		return 1
	case govern.QuotaTokens:
		return addSpend(max(s.usage.Input, 0), max(s.usage.Output, 0))
	}
	rates := sp.rates
	if r, ok := e.priceOf(s.served); ok && s.served != "" {
		rates = r
	}
	return pricing.Cost(rates, s.usage)
}

// settleSpend corrects the stream's reservations to what the call cost.
func (e *Engine) settleSpend(s *Stream, forwarded bool, now time.Time) {
	for _, sp := range s.spend {
		actual := e.spendActual(s, sp, forwarded)
		e.noteSpendHold(sp.key, -sp.amount)
		var err error
		if sp.lease {
			err = e.settleLeasedSpend(sp, actual, now)
		} else {
			err = e.adjustSpend(sp, actual, now)
		}
		if err != nil {
			e.logf(LogWarn, "settling a reservation on %s: %v", sp.key, err)
		}
	}
	s.spend = s.spend[:0]
}

// adjustSpend settles a reservation in the cell: the call's cost goes to
// the settled use and the reservation leaves this VM's hold, if the cell
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

// spendMine is this replica's use of a reserve-mode instance in the
// current period (for /tt/v1/me): its spend cell, or its lease's settled
// use and holds.
func (e *Engine) spendMine(in *govern.Instance, now time.Time) int64 {
	start := in.Limit.Period.Start(now).Unix()
	if e.leased(in) {
		c, _, found, err := e.leaseGet(leaseKey(kindSpend, in.CellKey()), kindSpend)
		if err != nil || !found || c.anchor != start {
			return 0
		}
		return addSpend(c.drawn, c.held(now.UnixNano()))
	}
	val, _, found, err := e.cells.store.Get(spendKey(in.CellKey()))
	if err != nil || !found {
		return 0
	}
	cell, ok := decodeSpend(val)
	if !ok || cell.start != start {
		return 0
	}
	return cell.total(now)
}

// noteSpendHold keeps the reservations this VM holds per spend or lease
// cell, whose expiry its tick pushes forward (refreshSpendHolds).
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
// spend or lease cell it holds reservations in. Called from the tick.
func (e *Engine) refreshSpendHolds(now time.Time) {
	for key := range e.spendHeld {
		if strings.HasPrefix(key, "tt/lease/") {
			_, _ = e.leaseUpdate(key, kindSpend, func(c *leaseCell) bool {
				c.hold(e.vm, 0, now, e.leaseTTL)
				return true
			})
			continue
		}
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
