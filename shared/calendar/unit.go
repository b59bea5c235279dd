// Package calendar owns calendar periods: hour, day, ISO week (from
// Monday), month, quarter and year, in UTC or in a time zone (LoadZone);
// the current period's start, and when it resets; and rolling windows of
// whole days, counted by seed 003's sliding rule (sliding.go).
package calendar

// Unit is a calendar period unit. Day, Week and Month keep the values they
// have always had: they are part of stored keys.
type Unit uint8

const (
	Day Unit = iota + 1
	Week
	Month
	Hour
	Quarter
	Year
)

// Units lists every unit, shortest first.
var Units = [...]Unit{Hour, Day, Week, Month, Quarter, Year}

// MaxUnit is the largest Unit value, for tables indexed by unit.
const MaxUnit = Year

// String returns the unit's config spelling: hour, day, week, month,
// quarter or year; "unknown" for any other value.
func (u Unit) String() string {
	switch u {
	case Hour:
		return "hour"
	case Day:
		return "day"
	case Week:
		return "week"
	case Month:
		return "month"
	case Quarter:
		return "quarter"
	case Year:
		return "year"
	}
	return "unknown"
}

// ParseUnit returns the unit spelled s in config (hour, day, week, month,
// quarter, year), and false for anything else.
func ParseUnit(s string) (Unit, bool) {
	for _, u := range Units {
		if u.String() == s {
			return u, true
		}
	}
	return 0, false
}
