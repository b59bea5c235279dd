// Package calendar owns calendar periods in UTC: day, ISO week (from
// Monday) and month, the current period's start, and when it resets.
package calendar

// Unit is a calendar period unit.
type Unit uint8

const (
	Day Unit = iota + 1
	Week
	Month
)

// String returns the unit's config spelling: day, week or month; "unknown"
// for any other value.
func (u Unit) String() string {
	switch u {
	case Day:
		return "day"
	case Week:
		return "week"
	case Month:
		return "month"
	}
	return "unknown"
}

// ParseUnit returns the unit spelled s in config (day, week, month), and
// false for anything else.
func ParseUnit(s string) (Unit, bool) {
	switch s {
	case "day":
		return Day, true
	case "week":
		return Week, true
	case "month":
		return Month, true
	}
	return 0, false
}
