package filter

import (
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// TestPeriodStartSpans: the engine's kept spans answer what Period.Start
// answers, across the boundaries of every calendar unit and rolling
// window, with more periods in turn than there are spans, the clock
// stepping forward and back.
func TestPeriodStartSpans(t *testing.T) {
	periods := []govern.Period{
		{Calendar: calendar.Hour}, {Calendar: calendar.Day}, {Calendar: calendar.Week},
		{Calendar: calendar.Month}, {Calendar: calendar.Quarter}, {Calendar: calendar.Year},
		{Rolling: 7}, {Rolling: 30}, {Window: time.Minute}, {Calendar: calendar.Day, Zone: "Europe/Berlin"},
	}
	var e Engine
	now := time.Date(2026, 12, 30, 21, 40, 0, 0, time.UTC)
	for step := 0; step < 6000; step++ {
		switch {
		case step%97 == 0:
			now = now.Add(-3 * time.Hour) // a clock set back
		default:
			now = now.Add(37 * time.Minute)
		}
		ps := periods[:6] // as many as there are spans, or fewer: kept
		if step >= 3000 {
			ps = periods // more: replaced in turn
		}
		for _, p := range ps {
			if got, want := e.periodStart(p, now), p.Start(now); !got.Equal(want) {
				t.Fatalf("%v at %v: periodStart %v, Start %v", p, now, got, want)
			}
		}
	}
}
