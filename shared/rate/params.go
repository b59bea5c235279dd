package rate

import "time"

// Params are a rate limit's numbers: Amount units per Period, and Burst, the
// most a drained gcra or token_bucket cell admits at once (zero or negative
// means Amount). The window algorithms ignore Burst; their capacity is
// Amount per window, at most MaxWindowCount.
//
// One cell may be stepped with a different Amount or Burst from one step to
// the next (a limit edited by a reload keeps its counter): it keeps the
// units it has in use and judges them against the Params of the step. The
// Period is part of the counter's identity and does not change under a
// cell.
//
// An Amount or Period that is zero or negative describes a limit with no
// capacity: nothing with a positive cost ever fits. Compile never produces
// one; the rule is here so that no input can divide by zero.
type Params struct {
	Amount int64
	Period time.Duration
	Burst  int64
}

// limits is Params checked and converted for the arithmetic: every field is
// positive, or ok is false.
type limits struct {
	amount, period, capacity uint64
	ok                       bool
}

func (p Params) limits(a Algorithm) limits {
	if p.Amount <= 0 || p.Period <= 0 {
		return limits{}
	}
	l := limits{amount: uint64(p.Amount), period: uint64(p.Period), ok: true}
	switch a {
	case GCRA, TokenBucket:
		l.capacity = l.amount
		if p.Burst > 0 {
			l.capacity = uint64(p.Burst)
		}
	case FixedWindow, SlidingWindow:
		l.capacity = min(l.amount, MaxWindowCount)
	default:
		return limits{}
	}
	return l
}
