package filter

import (
	"encoding/binary"
	"strconv"
	"time"

	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/llm"
	"github.com/tokentriage/tokentriage/shared/pricing"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/wire"
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
	if e.snap == nil {
		return e.uncheckable(s, in, v, wire.NoSnapshot)
	}
	if age := now.Sub(e.snap.generatedAt); age > snapshotTrust {
		return e.uncheckable(s, in, v, wire.StaleSnapshot(age, snapshotTrust))
	}
	rates, ok := e.priceOf(s.req.Model)
	if !ok {
		return e.uncheckable(s, in, v, "the model "+strconv.Quote(s.req.Model)+" has no price in the accountant's catalog, so the dearest cost of the call cannot be reserved")
	}
	start := calendar.Start(l.Period.Calendar, now).Unix()
	others := max(e.observed(in, now)-e.snapValue(in.ID+syncwire.ReplicaSuffix+e.replica, in, now), 0)
	input := int64(s.bodySize) // a token is at least one byte of the body
	outCap := s.outMax         // lowered by a reserve before this one
	if outCap < 0 {
		outCap = llm.OutputReserve(s.req)
	}
	key := spendKey(in.ID)
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		val, cas, found, err := e.cells.store.Get(key)
		if err != nil {
			return e.uncheckable(s, in, v, "its shared-data spend cell could not be read: "+err.Error())
		}
		mine := int64(0)
		if found && len(val) == 16 && int64(binary.LittleEndian.Uint64(val)) == start {
			mine = int64(binary.LittleEndian.Uint64(val[8:]))
		}
		avail := in.Amount - others - mine
		out, cost, fits := fitOutput(rates, input, outCap, avail)
		if !fits {
			if !e.over(s, in) {
				return nil
			}
			resets := calendar.End(l.Period.Calendar, now)
			r := wire.Refusal{
				RequestID:  s.id,
				LimitID:    l.ID,
				LimitType:  wire.LimitType(l.Type.String()),
				Node:       in.Node,
				Period:     l.Period.String(),
				ResetsAt:   resets,
				RetryAfter: wire.Seconds(resets.Sub(now)),
				Observed:   others + mine,
				Limit:      in.Amount,
			}
			return e.refuse(s, v, &r, in)
		}
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:], uint64(start))
		binary.LittleEndian.PutUint64(b[8:], uint64(mine+cost))
		swapped, err := e.cells.setNew(key, b[:], cas, found && len(val) == 16)
		if err != nil {
			return e.uncheckable(s, in, v, "its shared-data spend cell could not be updated: "+err.Error())
		}
		if !swapped {
			e.cells.retries++
			continue
		}
		s.spend = append(s.spend, spendReserve{key: key, start: start, amount: cost, rates: rates})
		if s.outMax < 0 || out < s.outMax {
			s.outMax = out
		}
		return nil
	}
	return e.uncheckable(s, in, v, errContention.Error())
}

// fitOutput finds the largest output maximum, at most outCap, whose
// dearest cost with input tokens fits in avail, and that cost. A call with
// output (outCap > 0) needs room for at least one output token.
func fitOutput(r pricing.Rates, input, outCap, avail int64) (out, cost int64, ok bool) {
	dear := func(n int64) int64 { return pricing.Cost(r, ledger.Usage{Input: input, Output: n}) }
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
		if err := e.adjustSpend(sp, actual-sp.amount); err != nil {
			e.logf(LogWarn, "settling a budget reserve on %s: %v", sp.key, err)
		}
	}
	s.spend = s.spend[:0]
}

// adjustSpend adds delta to the cell, if it still counts the period the
// reservation was taken in.
func (e *Engine) adjustSpend(sp spendReserve, delta int64) error {
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		val, cas, found, err := e.cells.store.Get(sp.key)
		if err != nil {
			return err
		}
		if !found || len(val) != 16 || int64(binary.LittleEndian.Uint64(val)) != sp.start {
			return nil // a new period: the reservation went with the old one
		}
		mine := max(int64(binary.LittleEndian.Uint64(val[8:]))+delta, 0)
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:], uint64(sp.start))
		binary.LittleEndian.PutUint64(b[8:], uint64(mine))
		swapped, err := e.cells.setNew(sp.key, b[:], cas, true)
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
	val, _, found, err := e.cells.store.Get(spendKey(in.ID))
	if err != nil || !found || len(val) != 16 || int64(binary.LittleEndian.Uint64(val)) != calendar.Start(in.Limit.Period.Calendar, now).Unix() {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(val[8:]))
}
