package rate

import "time"

// FromResult rebuilds a cell from r, the result it gave at instant at (a
// Take or a Peek there), so that it can be read later as the cell would be
// if nothing was taken in between. It is how /tt/v1/me shows a cell it
// cannot read itself, such as one kept in the fleet's Redis and known by
// its last answer: a full cell answered a minute ago is drained by now,
// and says so.
//
// A result does not hold the whole cell, so the cell rebuilt never reads
// emptier than the cell it came from. gcra and token_bucket are rebuilt
// from ResetAfter, the time to drain the units in use (rounded up to the
// nanosecond): at most one unit fuller than the cell, and exact when the
// period is a whole multiple of the amount in nanoseconds. fixed_window is
// exact. sliding_window's count may be partly the previous window's,
// sliding out, which the result does not tell apart: the count is read as
// all of one window, the current one when ResetAfter says it has units of
// its own, so it reads as full as the cell or fuller until both windows
// have passed.
func FromResult(a Algorithm, r Result, at time.Time, p Params) State {
	l := p.limits(a)
	if !l.ok {
		return State{}
	}
	t := at.UnixNano()
	var s State
	switch a {
	case GCRA, TokenBucket:
		if r.ResetAfter > 0 {
			used := mul(uint64(r.ResetAfter), l.amount)
			s = level{used: used, at: t}.state(a, l)
		}
	case FixedWindow, SlidingWindow:
		count := r.Limit - r.Remaining
		if count <= 0 || r.ResetAfter <= 0 {
			break
		}
		w := windowAt(a, State{}, t, l)
		w.cur = min(uint64(count), MaxWindowCount)
		if a == SlidingWindow && uint64(r.ResetAfter) <= w.left(l) {
			// Only the previous window's units are left, sliding out:
			// the most it can hold that carries count at at.
			w.cur = 0
			q, _ := mul(uint64(count), l.period).divmod(w.left(l))
			w.prev = min(q, MaxWindowCount)
		}
		s = w.state(a)
	}
	return s
}
