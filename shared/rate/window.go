package rate

import "math"

// The window algorithms count units per epoch-aligned window of one period:
// window k covers [k·period, (k+1)·period) in unix nanoseconds. The cell
// keeps the window index, the current window's count and, for
// sliding_window, the previous window's; counts are 16 bits wide
// (MaxWindowCount) and saturate there.

// window is a window cell rolled forward to now.
type window struct {
	index     int64  // ⌊now/period⌋
	elapsed   uint64 // now − window start, in [0, period)
	cur, prev uint64
}

// left is the time from now to the end of the current window.
func (w window) left(l limits) uint64 { return l.period - w.elapsed }

// windowAt rolls the cell s forward to the window holding now. A cell of
// another algorithm, or one two or more windows old, reads as empty.
func windowAt(a Algorithm, s State, now int64, l limits) window {
	p := int64(l.period)
	w := window{index: now / p}
	m := now % p
	if m < 0 {
		m += p
		w.index--
	}
	w.elapsed = uint64(m)
	if s.alg != a {
		return w
	}
	switch {
	case s.t == w.index:
		w.cur, w.prev = uint64(s.x), uint64(s.y)
	case w.index != math.MinInt64 && s.t == w.index-1:
		w.prev = uint64(s.x)
	}
	if a == FixedWindow {
		w.prev = 0
	}
	return w
}

func (w window) state(a Algorithm) State {
	s := State{alg: a, t: w.index, x: int64(min(w.cur, MaxWindowCount))}
	if a == SlidingWindow {
		s.y = int64(min(w.prev, MaxWindowCount))
	}
	return s
}

func windowAdjust(a Algorithm, s State, now int64, debit bool, mag uint64, l limits) State {
	w := windowAt(a, s, now, l)
	switch {
	case debit:
		w.cur = min(w.cur+min(mag, MaxWindowCount), MaxWindowCount)
	case mag <= w.cur:
		w.cur -= mag
	default:
		mag -= w.cur
		w.cur = 0
		w.prev -= min(mag, w.prev)
	}
	return w.state(a)
}

// remaining returns capacity − counted, at least 0.
func remaining(counted uint64, l limits) int64 {
	if counted >= l.capacity {
		return 0
	}
	return int64(l.capacity - counted)
}
