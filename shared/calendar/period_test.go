package calendar

import (
	"testing"
	"time"
)

func utc(y int, m time.Month, d, h, min, s, ns int) time.Time {
	return time.Date(y, m, d, h, min, s, ns, time.UTC)
}

func TestStartEnd(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*3600)
	newYork := time.FixedZone("EDT", -4*3600)
	for i, c := range []struct {
		u          Unit
		at         time.Time
		start, end time.Time
	}{
		// The seed 000 capture: 1,912,510 s before 2026-09-01.
		{Month, utc(2026, 8, 9, 20, 44, 50, 0), utc(2026, 8, 1, 0, 0, 0, 0), utc(2026, 9, 1, 0, 0, 0, 0)},
		// Days across midnight.
		{Day, utc(2026, 8, 9, 23, 59, 59, 999999999), utc(2026, 8, 9, 0, 0, 0, 0), utc(2026, 8, 10, 0, 0, 0, 0)},
		{Day, utc(2026, 8, 10, 0, 0, 0, 0), utc(2026, 8, 10, 0, 0, 0, 0), utc(2026, 8, 11, 0, 0, 0, 0)},
		{Day, utc(2026, 2, 28, 12, 0, 0, 0), utc(2026, 2, 28, 0, 0, 0, 0), utc(2026, 3, 1, 0, 0, 0, 0)},
		{Day, utc(2028, 2, 28, 12, 0, 0, 0), utc(2028, 2, 28, 0, 0, 0, 0), utc(2028, 2, 29, 0, 0, 0, 0)}, // leap year
		{Day, utc(2026, 12, 31, 23, 0, 0, 0), utc(2026, 12, 31, 0, 0, 0, 0), utc(2027, 1, 1, 0, 0, 0, 0)},
		// ISO weeks start on Monday: 2026-08-10 is a Monday.
		{Week, utc(2026, 8, 9, 23, 59, 59, 0), utc(2026, 8, 3, 0, 0, 0, 0), utc(2026, 8, 10, 0, 0, 0, 0)}, // Sunday
		{Week, utc(2026, 8, 10, 0, 0, 0, 0), utc(2026, 8, 10, 0, 0, 0, 0), utc(2026, 8, 17, 0, 0, 0, 0)},  // Monday
		{Week, utc(2026, 8, 12, 9, 0, 0, 0), utc(2026, 8, 10, 0, 0, 0, 0), utc(2026, 8, 17, 0, 0, 0, 0)},  // Wednesday
		{Week, utc(2026, 12, 31, 9, 0, 0, 0), utc(2026, 12, 28, 0, 0, 0, 0), utc(2027, 1, 4, 0, 0, 0, 0)}, // across the year
		{Week, utc(2027, 1, 2, 9, 0, 0, 0), utc(2026, 12, 28, 0, 0, 0, 0), utc(2027, 1, 4, 0, 0, 0, 0)},
		{Week, utc(2024, 3, 1, 0, 0, 0, 0), utc(2024, 2, 26, 0, 0, 0, 0), utc(2024, 3, 4, 0, 0, 0, 0)}, // across a leap day
		// Month ends, leap years, year boundaries.
		{Month, utc(2026, 1, 31, 23, 59, 59, 0), utc(2026, 1, 1, 0, 0, 0, 0), utc(2026, 2, 1, 0, 0, 0, 0)},
		{Month, utc(2026, 2, 28, 23, 59, 59, 0), utc(2026, 2, 1, 0, 0, 0, 0), utc(2026, 3, 1, 0, 0, 0, 0)},
		{Month, utc(2028, 2, 29, 12, 0, 0, 0), utc(2028, 2, 1, 0, 0, 0, 0), utc(2028, 3, 1, 0, 0, 0, 0)},
		{Month, utc(2026, 12, 15, 0, 0, 0, 0), utc(2026, 12, 1, 0, 0, 0, 0), utc(2027, 1, 1, 0, 0, 0, 0)},
		{Month, utc(2027, 1, 1, 0, 0, 0, 0), utc(2027, 1, 1, 0, 0, 0, 0), utc(2027, 2, 1, 0, 0, 0, 0)},
		// Inputs in other zones count in UTC: 2026-09-01 07:30 in Tokyo is
		// still August in UTC; 2026-08-31 21:00 in New York is September.
		{Month, time.Date(2026, 9, 1, 7, 30, 0, 0, tokyo), utc(2026, 8, 1, 0, 0, 0, 0), utc(2026, 9, 1, 0, 0, 0, 0)},
		{Month, time.Date(2026, 8, 31, 21, 0, 0, 0, newYork), utc(2026, 9, 1, 0, 0, 0, 0), utc(2026, 10, 1, 0, 0, 0, 0)},
		{Day, time.Date(2026, 8, 10, 8, 0, 0, 0, tokyo), utc(2026, 8, 9, 0, 0, 0, 0), utc(2026, 8, 10, 0, 0, 0, 0)},
		{Week, time.Date(2026, 8, 9, 22, 0, 0, 0, newYork), utc(2026, 8, 10, 0, 0, 0, 0), utc(2026, 8, 17, 0, 0, 0, 0)}, // Sunday there, Monday in UTC
	} {
		start, end := Start(c.u, c.at), End(c.u, c.at)
		if !start.Equal(c.start) || start.Location() != time.UTC {
			t.Errorf("case %d: Start(%s, %s) = %s; want %s", i, c.u, c.at, start, c.start)
		}
		if !end.Equal(c.end) || end.Location() != time.UTC {
			t.Errorf("case %d: End(%s, %s) = %s; want %s", i, c.u, c.at, end, c.end)
		}
	}
}

func TestSeedRetryAfter(t *testing.T) {
	now := utc(2026, 8, 9, 20, 44, 50, 0)
	if got := End(Month, now).Sub(now); got != 1912510*time.Second {
		t.Errorf("month reset in %v; seed 000 says 1912510s", got)
	}
}

func TestUnknownUnit(t *testing.T) {
	at := time.Date(2026, 8, 9, 22, 0, 0, 5, time.FixedZone("X", 3600))
	if got := Start(0, at); !got.Equal(at) || got.Location() != time.UTC {
		t.Errorf("Start(0) = %s", got)
	}
	if got := End(9, at); !got.Equal(at) {
		t.Errorf("End(9) = %s", got)
	}
}

func TestParseUnit(t *testing.T) {
	for _, u := range Units {
		if got, ok := ParseUnit(u.String()); !ok || got != u {
			t.Errorf("ParseUnit(%q) = %v, %v", u.String(), got, ok)
		}
	}
	for _, s := range []string{"", "Day", "years", "1m", "30d", "unknown"} {
		if _, ok := ParseUnit(s); ok {
			t.Errorf("ParseUnit(%q) accepted", s)
		}
	}
}

// TestEveryDayOfSomeYears walks every hour of 2024 to 2028 and checks the
// periods against their definitions.
func TestEveryDayOfSomeYears(t *testing.T) {
	for at := utc(2024, 1, 1, 0, 30, 0, 0); at.Year() < 2029; at = at.Add(time.Hour) {
		for _, u := range Units {
			s, e := Start(u, at), End(u, at)
			if at.Before(s) || !at.Before(e) {
				t.Fatalf("%s %s: [%s, %s) does not hold it", u, at, s, e)
			}
			if u == Week && (s.Weekday() != time.Monday || e.Sub(s) != 7*24*time.Hour) {
				t.Fatalf("week of %s: [%s, %s)", at, s, e)
			}
			if (u == Month || u == Quarter || u == Year) && (s.Day() != 1 || e.Day() != 1) {
				t.Fatalf("%s of %s: [%s, %s)", u, at, s, e)
			}
			if u == Quarter && (s.Month()-1)%3 != 0 || u == Year && s.Month() != 1 {
				t.Fatalf("%s of %s: [%s, %s)", u, at, s, e)
			}
			if u == Hour && (s.Minute() != 0 || e.Sub(s) != time.Hour) {
				t.Fatalf("hour of %s: [%s, %s)", at, s, e)
			}
			if !Start(u, e).Equal(e) {
				t.Fatalf("%s %s: the next period does not start at %s", u, at, e)
			}
		}
	}
}
