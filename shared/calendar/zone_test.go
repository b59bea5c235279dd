package calendar

import (
	"testing"
	"time"
)

// TestZonesAgreeWithGo holds every zone of the table to Go's own zone
// database (native, from $GOROOT/lib/time) over the years ahead: the same
// offset at every instant, every 6 hours and across each DST change. A
// failure after a Go upgrade means the table is stale: go generate
// ./shared/calendar.
func TestZonesAgreeWithGo(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)
	zones := Zones()
	if len(zones) < 400 {
		t.Fatalf("only %d zones", len(zones))
	}
	for _, name := range zones {
		ours, err := LoadZone(name)
		if err != nil {
			t.Errorf("LoadZone(%q): %v", name, err)
			continue
		}
		theirs, err := time.LoadLocation(name)
		if err != nil {
			t.Errorf("Go has no zone %q: %v", name, err)
			continue
		}
		// agree reports whether ours and Go's give m the same offset, and
		// fails the test when not.
		agree := func(m time.Time) bool {
			_, a := m.In(ours).Zone()
			_, b := m.In(theirs).Zone()
			if a != b {
				t.Errorf("%s at %s: offset %d, Go says %d", name, m, a, b)
			}
			return a == b
		}
		for at := from; at.Before(to); at = at.Add(6 * time.Hour) {
			if !agree(at) {
				break
			}
			// The exact instant of a change: both agree every quarter of an
			// hour up to the next step.
			next := at.Add(6 * time.Hour)
			_, o := at.In(ours).Zone()
			if _, n := next.In(ours).Zone(); n != o {
				for m := at; m.Before(next) && agree(m); m = m.Add(15 * time.Minute) {
				}
			}
		}
	}
}

func TestLoadZone(t *testing.T) {
	for _, name := range []string{"", "UTC"} {
		if loc, err := LoadZone(name); err != nil || loc != time.UTC {
			t.Errorf("LoadZone(%q) = %v, %v; want UTC", name, loc, err)
		}
	}
	for _, c := range []struct{ name, err string }{
		{"Europe/Berln", `unknown time zone "Europe/Berln" (an IANA name such as Europe/Berlin, America/New_York or UTC)`},
		{"europe/berlin", `unknown time zone "europe/berlin" (did you mean "Europe/Berlin"?)`},
		{"America/New York", `unknown time zone "America/New York" (did you mean "America/New_York"?)`},
		{"CET\tx", `unknown time zone "CET\tx" (an IANA name such as Europe/Berlin, America/New_York or UTC)`},
	} {
		if _, err := LoadZone(c.name); err == nil || err.Error() != c.err {
			t.Errorf("LoadZone(%q) = %v; want %s", c.name, err, c.err)
		}
	}
	berlin, err := LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	if got := berlin.String(); got != "Europe/Berlin" {
		t.Errorf("name %q", got)
	}
}

func TestStartEndInZones(t *testing.T) {
	berlin, _ := LoadZone("Europe/Berlin")
	kolkata, _ := LoadZone("Asia/Kolkata")
	newYork, _ := LoadZone("America/New_York")
	for i, c := range []struct {
		u          Unit
		loc        *time.Location
		at         string
		start, end string
	}{
		// A Berlin day starts at its midnight: 22:00 UTC in summer.
		{Day, berlin, "2026-08-09T21:59:59Z", "2026-08-08T22:00:00Z", "2026-08-09T22:00:00Z"},
		{Day, berlin, "2026-08-09T22:00:00Z", "2026-08-09T22:00:00Z", "2026-08-10T22:00:00Z"},
		// The day of the spring change has 23 hours, the autumn one 25.
		{Day, berlin, "2026-03-29T12:00:00Z", "2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"},
		{Day, berlin, "2026-10-25T12:00:00Z", "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z"},
		// The quarter of the seed's capture, in Berlin: July to September,
		// starting at midnight of 1 July Berlin time.
		{Quarter, berlin, "2026-08-09T20:44:50Z", "2026-06-30T22:00:00Z", "2026-09-30T22:00:00Z"},
		{Quarter, time.UTC, "2026-08-09T20:44:50Z", "2026-07-01T00:00:00Z", "2026-10-01T00:00:00Z"},
		{Quarter, berlin, "2026-12-31T23:30:00Z", "2026-12-31T23:00:00Z", "2027-03-31T22:00:00Z"},
		{Year, berlin, "2026-12-31T22:59:59Z", "2025-12-31T23:00:00Z", "2026-12-31T23:00:00Z"},
		{Year, time.UTC, "2026-08-09T20:44:50Z", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		// Hours in a half-hour zone start at :30 UTC.
		{Hour, kolkata, "2026-08-09T20:44:50Z", "2026-08-09T20:30:00Z", "2026-08-09T21:30:00Z"},
		{Hour, time.UTC, "2026-08-09T20:44:50Z", "2026-08-09T20:00:00Z", "2026-08-09T21:00:00Z"},
		// The hour New York repeats in November is two hours.
		{Hour, newYork, "2026-11-01T05:30:00Z", "2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z"},
		{Hour, newYork, "2026-11-01T06:30:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"},
		// Weeks start on Monday at local midnight.
		{Week, newYork, "2026-08-10T02:00:00Z", "2026-08-03T04:00:00Z", "2026-08-10T04:00:00Z"},
		{Month, newYork, "2026-09-01T03:59:59Z", "2026-08-01T04:00:00Z", "2026-09-01T04:00:00Z"},
	} {
		at, _ := time.Parse(time.RFC3339, c.at)
		s, e := StartIn(c.u, at, c.loc), EndIn(c.u, at, c.loc)
		if s.Format(time.RFC3339) != c.start || e.Format(time.RFC3339) != c.end {
			t.Errorf("case %d: %s in %s at %s: [%s, %s); want [%s, %s)", i, c.u, c.loc, c.at, s.Format(time.RFC3339), e.Format(time.RFC3339), c.start, c.end)
		}
	}
}

// TestEveryHourInZones walks the years ahead in zones with DST, half and
// three-quarter hour offsets, and checks every period holds its instant
// and follows on from the one before.
func TestEveryHourInZones(t *testing.T) {
	for _, name := range []string{"Europe/Berlin", "America/New_York", "Asia/Kolkata", "Asia/Kathmandu", "Australia/Lord_Howe", "Pacific/Chatham", "America/Sao_Paulo", "Pacific/Apia"} {
		loc, err := LoadZone(name)
		if err != nil {
			t.Fatal(err)
		}
		for at := time.Date(2026, 1, 1, 0, 7, 0, 0, time.UTC); at.Year() < 2028; at = at.Add(time.Hour) {
			for _, u := range Units {
				s, e := StartIn(u, at, loc), EndIn(u, at, loc)
				if at.Before(s) || !at.Before(e) {
					t.Fatalf("%s %s %s: [%s, %s) does not hold it", name, u, at, s, e)
				}
				if !StartIn(u, e, loc).Equal(e) {
					t.Fatalf("%s %s %s: the next period does not start at %s (it starts at %s)", name, u, at, e, StartIn(u, e, loc))
				}
			}
		}
	}
}
