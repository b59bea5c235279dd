package filter

import (
	"time"

	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// Periods beyond the UTC day, week and month (hour, quarter, year, a time
// zone's boundaries) are read like them: the snapshot's entry counts the
// period holding now, and resets_at is the period's end in its zone. A
// rolling window of days (period: 30d) comes as the entry of the day
// bucket holding now, counting every bucket of the window but the oldest,
// and <id>#slide, the oldest, of which the share still inside the window
// counts (seed 003's sliding rule): the count falls as the day goes on,
// with no new snapshot. Its resets_at is <id>#resets, when the accountant
// says the window falls under its amount.

// windowValue is a rolling window's count at now from its entry ent (and
// its #slide): in the bucket holding now, the full buckets and the
// oldest's share; from the bucket before (a snapshot older than the
// midnight between), both whole, which overstates, never understates.
func (e *Engine) windowValue(id string, ent counterValue, p govern.Period, now time.Time) int64 {
	cur := p.Start(now)
	slide := e.counter(id + syncwire.SlideSuffix)
	switch ent.start {
	case cur.Unix():
		v := ent.value
		if slide.found && slide.start == ent.start {
			end := p.End(now)
			v += calendar.Share(slide.value, end.Sub(now), end.Sub(cur))
		}
		return v
	case p.Start(cur.Add(-time.Second)).Unix():
		v := ent.value
		if slide.found && slide.start == ent.start {
			v += slide.value
		}
		return v
	}
	return 0
}

// resetsAt is when the period of a spend or quota instance holding now
// ends: the calendar period's end, or for a rolling window the moment
// the accountant says it falls under its amount (else the end of the day
// bucket holding now).
func (e *Engine) resetsAt(in *govern.Instance, now time.Time) time.Time {
	p := in.Limit.Period
	if p.Rolling > 0 && !e.snapshotAt().IsZero() {
		if r := e.counter(in.ID + syncwire.ResetsSuffix); r.found && r.start == p.Start(now).Unix() && r.value > now.Unix() {
			return time.Unix(r.value, 0).UTC()
		}
	}
	return p.End(now)
}
