package rate

import "math"

// gcra: the generic cell rate algorithm. The emission interval is
// T = period/amount; the cell remembers its theoretical arrival time (TAT).
// A cost n is admitted when max(TAT, now) + n·T − now ≤ burst·T, and then
// TAT becomes max(TAT, now) + n·T. So a drained key admits burst at once,
// then one unit per emission interval.
//
// T is rarely a whole number of nanoseconds, so everything is computed in
// "debt" units of 1/amount ns: debt = (TAT − now)·amount, the cost n is
// n·period, the capacity is burst·period. The state keeps TAT in ns and the
// sub-nanosecond remainder separately, both exact.

// gcraDebt returns the cell's debt at now, in 1/amount ns.
func gcraDebt(s State, now int64, l limits) u128 {
	if s.alg != GCRA || s.t < now {
		return u128{}
	}
	frac := uint64(s.x)
	if frac >= l.amount { // the amount was edited down; drop sub-ns noise
		frac = l.amount - 1
	}
	return mul(uint64(s.t)-uint64(now), l.amount).add(u64(frac))
}

// gcraState returns the state holding debt at now.
func gcraState(now int64, debt u128, l limits) State {
	q, r := debt.divmod(l.amount)
	if q > roomAfter(now) {
		return State{alg: GCRA, t: math.MaxInt64}
	}
	return State{alg: GCRA, t: int64(uint64(now) + q), x: int64(r)}
}

func gcraResult(debt u128, l limits) Result {
	r := Result{Limit: clampInt64(l.capacity), Allowed: true}
	if capacity := mul(l.capacity, l.period); debt.less(capacity) {
		q, _ := capacity.sub(debt).divmod(l.period)
		r.Remaining = clampInt64(q)
	}
	r.ResetAfter = nanos(debt.divCeil(l.amount))
	return r
}

func gcraTake(s State, now int64, cost uint64, l limits) (Result, State) {
	if !l.ok {
		return Result{Allowed: cost == 0, Unfittable: cost > 0}, s
	}
	debt := gcraDebt(s, now, l)
	if cost == 0 { // a probe always fits, even in a cell a debit pushed past its cap
		return gcraResult(debt, l), s
	}
	if cost > l.capacity {
		r := gcraResult(debt, l)
		r.Allowed, r.Unfittable = false, true
		return r, s
	}
	next := debt.add(mul(cost, l.period))
	if capacity := mul(l.capacity, l.period); capacity.less(next) {
		r := gcraResult(debt, l)
		r.Allowed = false
		r.RetryAfter = nanos(next.sub(capacity).divCeil(l.amount))
		return r, s
	}
	return gcraResult(next, l), gcraState(now, next, l)
}

func gcraAdjust(s State, now int64, debit bool, mag uint64, l limits) State {
	debt := gcraDebt(s, now, l)
	if debit {
		debt = debt.add(mul(mag, l.period))
	} else {
		debt = debt.sub(mul(mag, l.period))
	}
	return gcraState(now, debt, l)
}
