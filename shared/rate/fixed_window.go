package rate

// fixed_window admits a cost while the current window's count plus the cost
// stays within the amount; the count starts again at 0 on every window
// boundary.

func fixedResult(w window, l limits) Result {
	r := Result{Allowed: true, Limit: int64(l.capacity), Remaining: remaining(w.cur, l)}
	if w.cur > 0 {
		r.ResetAfter = nanos(w.left(l))
	}
	return r
}

func fixedTake(s State, now int64, cost uint64, l limits) (Result, State) {
	if !l.ok {
		return Result{Allowed: cost == 0, Unfittable: cost > 0}, s
	}
	w := windowAt(FixedWindow, s, now, l)
	switch {
	case cost == 0: // a probe always fits
		return fixedResult(w, l), s
	case cost > l.capacity:
		r := fixedResult(w, l)
		r.Allowed, r.Unfittable = false, true
		return r, s
	case w.cur+cost > l.capacity:
		r := fixedResult(w, l)
		r.Allowed = false
		r.RetryAfter = nanos(w.left(l)) // the next window starts empty
		return r, s
	}
	w.cur += cost
	return fixedResult(w, l), w.state(FixedWindow)
}
