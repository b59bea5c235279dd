package rate

import "time"

// Take asks the cell s, at instant now, for cost units under the limit p,
// and returns the decision and the cell to store. When the result is not
// Allowed the returned State is s itself, unchanged, so a refusal never
// needs a write. A negative cost counts as 0 (use Adjust to give units
// back). An unknown algorithm has no capacity: a positive cost is
// Unfittable.
//
// The arithmetic is exact: amounts are kept scaled by the period or the
// amount in 128-bit integers, so no sequence of steps drifts.
func Take(a Algorithm, s State, now time.Time, cost int64, p Params) (Result, State) {
	if cost < 0 {
		cost = 0
	}
	l := p.limits(a)
	n := now.UnixNano()
	switch a {
	case GCRA, TokenBucket:
		return levelTake(a, s, n, uint64(cost), l)
	case FixedWindow:
		return fixedTake(s, n, uint64(cost), l)
	case SlidingWindow:
		return slidingTake(s, n, uint64(cost), l)
	}
	return Result{Allowed: cost == 0, Unfittable: cost > 0}, s
}

// Peek returns what a probe of cost 0 sees at now: Limit, Remaining and
// ResetAfter, with Allowed true. It never changes the cell; /tt/v1/me reports
// observed as Limit − Remaining.
func Peek(a Algorithm, s State, now time.Time, p Params) Result {
	r, _ := Take(a, s, now, 0, p)
	return r
}

// Adjust debits (delta > 0) or credits (delta < 0) the cell without any
// admission decision: tpm reconcile commits the signed difference between a
// reserve and the usage reported. A debit may push the cell past its
// capacity (Remaining then reads 0 until it drains); a credit never drives
// the cell below drained (a gcra or token_bucket cell at full capacity, a
// window count of 0). A sliding_window credit is taken from the current
// window first, then from the previous one. Adjust with delta 0, or with
// Params that have no capacity, returns s unchanged.
func Adjust(a Algorithm, s State, now time.Time, delta int64, p Params) State {
	l := p.limits(a)
	if delta == 0 || !l.ok {
		return s
	}
	n := now.UnixNano()
	debit := delta > 0
	mag := uint64(delta)
	if !debit {
		mag = uint64(-(delta + 1)) + 1 // |delta| without overflow at MinInt64
	}
	switch a {
	case GCRA, TokenBucket:
		return levelAdjust(a, s, n, debit, mag, l)
	case FixedWindow, SlidingWindow:
		return windowAdjust(a, s, n, debit, mag, l)
	}
	return s
}

// nanos converts a non-negative nanosecond count to a Duration, saturating.
func nanos(v uint64) time.Duration { return time.Duration(clampInt64(v)) }
