package govern

import (
	"strconv"
	"time"

	"github.com/tokentriage/tokentriage/shared/calendar"
)

// String renders the period as the wire shows it: hour, day, week, month,
// quarter or year for a calendar period, "30d" for a rolling window of
// days, the window as time.Duration.String for a rate window ("1m0s"),
// and "" for none (concurrency). The time zone is not part of it (the
// period's resets_at says when it ends).
func (p Period) String() string {
	switch {
	case p.Calendar != 0:
		return CalendarName(p.Calendar)
	case p.Rolling > 0:
		return strconv.Itoa(p.Rolling) + "d"
	case p.Window != 0:
		return p.Window.String()
	}
	return ""
}

// identity is the period as a counter identity names it: String, with
// "@<zone>" when the period is in a time zone, so that changing the zone
// rotates the counter as changing the period does.
func (p Period) identity() string {
	if p.Zone != "" {
		return p.String() + "@" + p.Zone
	}
	return p.String()
}

// IsWindow reports whether the period is a rate window.
func (p Period) IsWindow() bool { return p.Calendar == 0 && p.Rolling == 0 && p.Window > 0 }

// Counted reports whether the period is one a spend or quota limit counts
// over: a calendar period or a rolling window of days.
func (p Period) Counted() bool { return p.Calendar != 0 || p.Rolling > 0 }

// Location is the period's time zone (UTC when it names none).
func (p Period) Location() *time.Location {
	if p.loc == nil {
		return time.UTC
	}
	return p.loc
}

// Start is the start of the period holding t, in UTC: the calendar
// period's (in the period's zone), or, for a rolling window, its current
// day bucket's. The zero time for a window or no period.
func (p Period) Start(t time.Time) time.Time {
	if u, ok := p.bucket(); ok {
		return calendar.StartIn(u, t, p.loc)
	}
	return time.Time{}
}

// End is when the period holding t ends, in UTC (for a rolling window, its
// current day bucket's end). The zero time for a window or no period.
func (p Period) End(t time.Time) time.Time {
	if u, ok := p.bucket(); ok {
		return calendar.EndIn(u, t, p.loc)
	}
	return time.Time{}
}

// bucket is the calendar unit a counted period's counter lives in: the
// calendar period's, or a rolling window's day buckets.
func (p Period) bucket() (calendar.Unit, bool) {
	switch {
	case p.Calendar != 0:
		return p.Calendar, true
	case p.Rolling > 0:
		return calendar.Day, true
	}
	return 0, false
}

// Sliding is the rolling window of a period: Days is zero unless the
// period is rolling.
func (p Period) Sliding() calendar.Rolling {
	return calendar.Rolling{Days: p.Rolling, Loc: p.loc}
}

// Classic reports whether the period is a UTC day, ISO week or month, the
// three every release has had: their counters are stored by unit and
// start alone.
func (p Period) Classic() bool {
	return p.Zone == "" && p.Rolling == 0 && (p.Calendar == calendar.Day || p.Calendar == calendar.Week || p.Calendar == calendar.Month)
}

// KeepUntil is when a counter of the period that holds t is no longer
// read: the period's end, or for a rolling window's day bucket the end of
// the last window that holds it.
func (p Period) KeepUntil(t time.Time) time.Time {
	if p.Rolling > 0 {
		s := calendar.StartIn(calendar.Day, t, p.loc).In(p.Location())
		y, m, d := s.Date()
		return time.Date(y, m, d+p.Rolling+1, 0, 0, 0, 0, p.Location()).UTC()
	}
	return p.End(t)
}
