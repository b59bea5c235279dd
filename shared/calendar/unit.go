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
