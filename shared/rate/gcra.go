package rate

// gcra: the generic cell rate algorithm, kept in its leaky-bucket form
// (level.go). With emission interval T = period/amount, a cell whose level
// is u units at now has the theoretical arrival time TAT = now + u·T, and
// the bucket's rule (admit n while u + n ≤ burst, then u += n) is GCRA's
// (admit while max(TAT, now) + n·T − now ≤ burst·T, then advance TAT by
// n·T). So a drained key admits burst at once, then one unit per emission
// interval.
//
// A reader whose clock is behind the cell's instant t (another VM's clock
// ahead of its own) runs the drain backwards: it sees u + (t − now)·amount
// /period, which is what the TAT gives at its now.

// gcraAt reads a gcra cell at now.
func gcraAt(s State, now int64, l limits) level {
	lv := level{at: now}
	switch {
	case s.alg != GCRA:
	case s.isFormat1():
		lv.used = tatLevel(s, now, l)
	case now >= s.t:
		lv.used = drain(storedLevel(s, l.period), uint64(now)-uint64(s.t), l.amount)
	default:
		lv.used = storedLevel(s, l.period).add(mul(uint64(s.t)-uint64(now), l.amount))
	}
	return lv
}

// tatLevel reads a format-1 gcra cell: its theoretical arrival time t in
// ns and the sub-nanosecond rest x in 1/amount ns. The level is
// (TAT − now)·amount, exact when l has the amount the cell was written
// under.
func tatLevel(s State, now int64, l limits) u128 {
	if s.t < now {
		return u128{}
	}
	frac := uint64(s.x)
	if frac >= l.amount {
		frac = l.amount - 1
	}
	return mul(uint64(s.t)-uint64(now), l.amount).add(u64(frac))
}
