package calendar

import "time"

// Start returns the start of the period of unit u that holds t, in UTC:
// midnight for Day, Monday midnight for Week (ISO 8601 weeks), the first of
// the month at midnight for Month. t may be in any zone; the period is
// always the UTC one. An unknown unit returns t in UTC.
func Start(u Unit, t time.Time) time.Time {
	t = t.UTC()
	y, m, d := t.Date()
	switch u {
	case Day:
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	case Week:
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		return time.Date(y, m, d-back, 0, 0, 0, 0, time.UTC)
	case Month:
		return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	}
	return t
}

// End returns the start of the next period, when the period holding t
// resets (resets_at on the wire), in UTC. An unknown unit returns t in UTC.
func End(u Unit, t time.Time) time.Time {
	s := Start(u, t)
	switch u {
	case Day:
		return s.AddDate(0, 0, 1)
	case Week:
		return s.AddDate(0, 0, 7)
	case Month:
		return s.AddDate(0, 1, 0)
	}
	return s
}
