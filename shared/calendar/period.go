package calendar

import "time"

// Start returns the start of the period of unit u that holds t, in UTC:
// the hour, midnight for Day, Monday midnight for Week (ISO 8601 weeks),
// the first of the month, of the quarter (January, April, July, October)
// or of the year at midnight. t may be in any zone; the period is always
// the UTC one. An unknown unit returns t in UTC.
func Start(u Unit, t time.Time) time.Time { return StartIn(u, t, time.UTC) }

// End returns the start of the next period, when the period holding t
// resets (resets_at on the wire), in UTC. An unknown unit returns t in UTC.
func End(u Unit, t time.Time) time.Time { return EndIn(u, t, time.UTC) }

// StartIn is Start in the time zone loc: the period's boundaries are the
// zone's wall clock (a day in Europe/Berlin starts at its midnight, 22:00 or
// 23:00 UTC). The result is in UTC. A nil loc is UTC.
func StartIn(u Unit, t time.Time, loc *time.Location) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	l := t.In(loc)
	y, m, d := l.Date()
	var s time.Time
	switch u {
	case Hour:
		s = hourStart(t, l)
	case Day:
		s = time.Date(y, m, d, 0, 0, 0, 0, loc)
	case Week:
		back := (int(l.Weekday()) + 6) % 7 // days since Monday
		s = time.Date(y, m, d-back, 0, 0, 0, 0, loc)
	case Month:
		s = time.Date(y, m, 1, 0, 0, 0, 0, loc)
	case Quarter:
		s = time.Date(y, m-(m-1)%3, 1, 0, 0, 0, 0, loc)
	case Year:
		s = time.Date(y, 1, 1, 0, 0, 0, 0, loc)
	default:
		s = t
	}
	return s.UTC()
}

// EndIn is End in the time zone loc (see StartIn).
func EndIn(u Unit, t time.Time, loc *time.Location) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	s := StartIn(u, t, loc)
	l := s.In(loc)
	y, m, d := l.Date()
	var e time.Time
	switch u {
	case Hour:
		l := t.In(loc)
		next := wallHour(t, l).Add(time.Hour)
		e = next
		if x, ok := change(t, next, loc); ok && x.Before(next) {
			e = x
		}
	case Day:
		e = time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	case Week:
		e = time.Date(y, m, d+7, 0, 0, 0, 0, loc)
	case Month:
		e = time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	case Quarter:
		e = time.Date(y, m+3, 1, 0, 0, 0, 0, loc)
	case Year:
		e = time.Date(y+1, 1, 1, 0, 0, 0, 0, loc)
	default:
		e = s
	}
	return e.UTC()
}

// wallHour is the instant the wall clock of l (t in its zone) last showed
// a whole hour, at t's offset.
func wallHour(t time.Time, l time.Time) time.Time {
	return t.Add(-time.Duration(l.Minute())*time.Minute - time.Duration(l.Second())*time.Second - time.Duration(l.Nanosecond()))
}

// hourStart is the start of the hour period holding t: the wall clock's
// last whole hour, or the offset change since then. A change by a whole
// hour keeps the boundaries where they were; a change by half an hour
// (Australia/Lord_Howe) starts a period of its own, so that the hours the
// wall clock repeats never overlap.
func hourStart(t time.Time, l time.Time) time.Time {
	s := wallHour(t, l)
	if x, ok := change(s, t, l.Location()); ok && x.After(s) {
		return x
	}
	return s
}

// change finds the first instant after a, up to b, where loc's offset is
// not what it is at a (to the second), if there is one; it assumes at
// most one change in (a, b].
func change(a, b time.Time, loc *time.Location) (time.Time, bool) {
	_, oa := a.In(loc).Zone()
	if _, ob := b.In(loc).Zone(); oa == ob {
		return time.Time{}, false
	}
	// Offsets change on whole seconds: search them.
	lo, hi := a.Unix(), b.Unix()
	if b.Nanosecond() != 0 {
		hi++
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if _, om := time.Unix(mid, 0).In(loc).Zone(); om == oa {
			lo = mid
		} else {
			hi = mid
		}
	}
	return time.Unix(hi, 0).UTC(), true
}
