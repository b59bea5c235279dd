package rate

import "math"

// gcra and token_bucket are one leaky bucket, read two ways (gcra.go,
// token_bucket.go): the cell holds the units in use, which drain at amount
// per period, and a cost n fits while in use + n ≤ burst. A State keeps the
// units in use at its instant t, as x whole units and y more in 1/period
// units, so nothing stored depends on the amount or the burst: a cell read
// with an edited amount or burst has the units in use it had, drained at
// the new amount from t on.
//
// The arithmetic scales the level by the period: used·period, in
// unit-nanoseconds, drains by amount every nanosecond. A cost n is n·period,
// the capacity burst·period, and a wait is ⌈excess ÷ amount⌉ ns.

// level is a gcra or token_bucket cell read at an instant.
type level struct {
	used u128  // units in use, times the period
	at   int64 // the instant used is for, which a written cell keeps as t
	// lag is how far the reader's clock is behind at (token_bucket only):
	// the level drains again once it has passed.
	lag uint64
}

// storedLevel returns the units in use at s.t, times the period. A
// remainder of a whole unit or more was written under another period (a
// counter whose identity differs, so never in the filter) and is dropped.
func storedLevel(s State, period uint64) u128 {
	frac := uint64(s.y)
	if frac >= period {
		frac = 0
	}
	return mul(uint64(s.x), period).add(u64(frac))
}

// drain returns used less what drains in elapsed ns at amount per ns, at
// least 0.
func drain(used u128, elapsed, amount uint64) u128 {
	return used.sub(mul(elapsed, amount))
}

// state returns the cell holding lv. The units in use saturate at
// MaxInt64 whole units.
func (lv level) state(a Algorithm, l limits) State {
	q, r := lv.used.divmod(l.period)
	if q > math.MaxInt64 {
		q, r = math.MaxInt64, 0
	}
	return State{alg: a, t: lv.at, x: int64(q), y: int64(r)}
}

// wait returns how long until want units fit (want ≤ capacity): 0 when
// they already do.
func (lv level) wait(want uint64, l limits) uint64 {
	room := mul(l.capacity-want, l.period)
	if !room.less(lv.used) {
		return 0
	}
	w := lv.used.sub(room).divCeil(l.amount)
	if w+lv.lag < w {
		return math.MaxUint64
	}
	return w + lv.lag
}

func (lv level) result(l limits) Result {
	r := Result{Allowed: true, Limit: clampInt64(l.capacity)}
	if capacity := mul(l.capacity, l.period); lv.used.less(capacity) {
		q, _ := capacity.sub(lv.used).divmod(l.period)
		r.Remaining = clampInt64(q)
	}
	r.ResetAfter = nanos(lv.wait(l.capacity, l))
	return r
}

// levelAt reads a gcra or token_bucket cell at now.
func levelAt(a Algorithm, s State, now int64, l limits) level {
	if a == GCRA {
		return gcraAt(s, now, l)
	}
	return bucketAt(s, now, l)
}

// levelTake is Take for gcra and token_bucket.
func levelTake(a Algorithm, s State, now int64, cost uint64, l limits) (Result, State) {
	if !l.ok {
		return Result{Allowed: cost == 0, Unfittable: cost > 0}, s
	}
	lv := levelAt(a, s, now, l)
	switch {
	case cost == 0: // a probe always fits, even in a cell a debit pushed past its cap
		return lv.result(l), s
	case cost > l.capacity:
		r := lv.result(l)
		r.Allowed, r.Unfittable = false, true
		return r, s
	}
	next := lv.used.add(mul(cost, l.period))
	if mul(l.capacity, l.period).less(next) {
		r := lv.result(l)
		r.Allowed = false
		r.RetryAfter = nanos(lv.wait(cost, l))
		return r, s
	}
	lv.used = next
	return lv.result(l), lv.state(a, l)
}

// levelAdjust is Adjust for gcra and token_bucket: it adds (debit) or
// removes mag units, stopping at drained.
func levelAdjust(a Algorithm, s State, now int64, debit bool, mag uint64, l limits) State {
	lv := levelAt(a, s, now, l)
	if debit {
		lv.used = lv.used.add(mul(mag, l.period))
	} else {
		lv.used = lv.used.sub(mul(mag, l.period))
	}
	return lv.state(a, l)
}
