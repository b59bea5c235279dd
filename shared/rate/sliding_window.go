package rate

// sliding_window counts the current window plus the share of the previous
// window still inside one period back from now: the previous count weighted
// by the fraction of the current window still to run, rounded up. At 14:20
// in hourly windows, with 500 counted since 14:00 and 1,200 in the hour
// before, 1,200·40/60 = 800 carries over and 1,300 is counted.

// carried returns ⌈prev·(period−elapsed)/period⌉.
func (w window) carried(l limits) uint64 {
	if w.prev == 0 {
		return 0
	}
	return mul(w.prev, w.left(l)).divCeil(l.period)
}

// wait returns how far into a window whose previous count is prev the
// carried share has shrunk to at most room: the smallest e with
// ⌈prev·(period−e)/period⌉ ≤ room.
func slideWait(prev, room uint64, l limits) uint64 {
	if room >= prev {
		return 0
	}
	q, _ := mul(room, l.period).divmod(prev)
	return l.period - q
}

func slidingResult(w window, l limits) Result {
	r := Result{Allowed: true, Limit: int64(l.capacity), Remaining: remaining(w.cur+w.carried(l), l)}
	switch {
	case w.cur > 0: // the current count slides out by the end of the next window
		r.ResetAfter = nanos(w.left(l) + l.period)
	case w.prev > 0:
		r.ResetAfter = nanos(w.left(l))
	}
	return r
}

func slidingTake(s State, now int64, cost uint64, l limits) (Result, State) {
	if !l.ok {
		return Result{Allowed: cost == 0, Unfittable: cost > 0}, s
	}
	w := windowAt(SlidingWindow, s, now, l)
	if cost == 0 { // a probe always fits
		return slidingResult(w, l), s
	}
	if cost > l.capacity {
		r := slidingResult(w, l)
		r.Allowed, r.Unfittable = false, true
		return r, s
	}
	if w.cur+w.carried(l)+cost > l.capacity {
		r := slidingResult(w, l)
		r.Allowed = false
		if w.cur+cost <= l.capacity {
			// Fits later in this window, once enough of prev slid out.
			r.RetryAfter = nanos(slideWait(w.prev, l.capacity-w.cur-cost, l) - w.elapsed)
		} else {
			// Fits in the next window, once enough of cur slid out.
			r.RetryAfter = nanos(w.left(l) + slideWait(w.cur, l.capacity-cost, l))
		}
		return r, s
	}
	w.cur += cost
	return slidingResult(w, l), w.state(SlidingWindow)
}
