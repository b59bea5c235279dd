package core

import (
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/accountant/store"
	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/sat"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// Periods beyond the UTC day, week and month: an hour, a quarter, a year,
// a period in a time zone, a rolling window of days.
//
// A counter of such a period is stored under a key that carries its end
// (store.Key.End), so a store tells current and ended counters apart
// without a time zone. A rolling window's counters are its day buckets
// (each kept until the last window holding it ends); the snapshot gives
// the gateway the window as two figures of the bucket holding now: the
// entry itself (every bucket but the oldest) and <id>#slide (the oldest
// bucket, of which the gateway counts the share still inside the window,
// seed 003's sliding rule), with <id>#resets, when the window is over its
// amount, the Unix second it falls under it.
//
// The aggregates that re-derive counters are kept in families: per UTC
// day (the UTC periods), per day of each time zone the plan names, and per
// quarter of an hour for the last two hours (hour periods, whose
// boundaries fall on quarter hours in every zone).

// Aggregate families.
const (
	famUTC     uint8 = iota // bucket: Unix day
	famQuarter              // bucket: Unix second / 900, the last two hours
	famZone0                // famZone0+i: the plan's i-th zone; bucket: that zone's day start, Unix s
)

// quarterKeep is how long quarter-hour aggregates are kept.
const quarterKeep = 2 * time.Hour

// SlideSuffix and ResetsSuffix name a rolling window's companion entries.
const (
	SlideSuffix  = syncwire.SlideSuffix
	ResetsSuffix = syncwire.ResetsSuffix
)

// quarterFam says whether the quarter-hour aggregates are kept (the plan
// has an hour period: kept only then, as they double the aggregates of
// the last two hours) and hold every row of the last two hours.
type quarterFam struct{ on, complete bool }

// zoneFam is one time zone the plan names, and whether its aggregates
// hold every row since the earliest current period (complete).
type zoneFam struct {
	name     string
	loc      *time.Location
	complete bool
}

// keyOf is the store key of target t's counter for a row that ended at.
func keyOf(t target, at time.Time) store.Key {
	p := t.period
	if p.Classic() {
		return store.Key{ID: t.id, Unit: p.Calendar, Start: calendar.Start(p.Calendar, at).Unix()}
	}
	u := p.Calendar
	if p.Rolling > 0 {
		u = calendar.Day
	}
	return store.Key{ID: t.id, Unit: u, Start: p.Start(at).Unix(), End: p.KeepUntil(at).Unix()}
}

// famOf is the aggregate family that re-derives counters of period p.
func (c *Core) famOf(p govern.Period) uint8 {
	switch {
	case p.Calendar == calendar.Hour:
		return famQuarter
	case p.Zone != "":
		for i, z := range c.zones {
			if z.name == p.Zone {
				return famZone0 + uint8(i)
			}
		}
	}
	return famUTC
}

// bucketTime is when aggregate bucket k starts.
func bucketTime(fam uint8, bucket int64) time.Time {
	switch fam {
	case famUTC:
		return time.Unix(bucket*86400, 0).UTC()
	case famQuarter:
		return time.Unix(bucket*900, 0).UTC()
	}
	return time.Unix(bucket, 0).UTC()
}

// armPeriods notes the plan's time zones and periods: zones new to the
// aggregates are incomplete until Backfill (or, before any row was
// folded, the replay at start) fills them.
func (c *Core) armPeriods() {
	old := c.zones
	c.zones = nil
	c.periods = map[string]govern.Period{}
	hours := false
	defer func() {
		switch {
		case hours && !c.quarters.on:
			// Before any row, the replay at start brings them.
			c.quarters = quarterFam{on: true, complete: c.stats.Folded == 0 && len(c.aggs) == 0}
		case !hours && c.quarters.on:
			c.quarters = quarterFam{}
			for k := range c.aggs {
				if k.fam == famQuarter {
					delete(c.aggs, k)
				}
			}
		}
	}()
	if c.armed == nil {
		return
	}
	for _, l := range c.armed.Plan.Limits {
		p := l.Period
		if l.Type.Class() != govern.LedgerSettled || !p.Counted() || p.Classic() {
			continue
		}
		hours = hours || p.Calendar == calendar.Hour
		c.periods[p.String()+"@"+p.Zone] = p
		if p.Zone == "" || p.Calendar == calendar.Hour || c.zoneIndex(p.Zone) >= 0 {
			continue
		}
		z := zoneFam{name: p.Zone, loc: p.Location(), complete: c.stats.Folded == 0 && len(c.aggs) == 0}
		for _, o := range old {
			if o.name == z.name {
				z.complete = o.complete
			}
		}
		c.zones = append(c.zones, z)
	}
	// A zone dropped from the plan takes its aggregates with it.
	for k := range c.aggs {
		if k.fam >= famZone0 {
			name := old[k.fam-famZone0].name
			if i := c.zoneIndex(name); i < 0 {
				delete(c.aggs, k)
			} else if uint8(i) != k.fam-famZone0 {
				a := c.aggs[k]
				delete(c.aggs, k)
				k.fam = famZone0 + uint8(i)
				c.aggs[k] = a
			}
		}
	}
}

func (c *Core) zoneIndex(name string) int {
	for i, z := range c.zones {
		if z.name == name {
			return i
		}
	}
	return -1
}

// NeedsHistory reports whether the aggregates lack rows the plan's
// current periods hold: a time zone new to them, or a period reaching back
// before the oldest row they keep (a year, where a month was the longest).
// The caller then feeds the ledger's rows since ReplayFrom to Backfill,
// and arms again to re-derive the counters from them.
func (c *Core) NeedsHistory() bool {
	for _, z := range c.zones {
		if !z.complete {
			return true
		}
	}
	if c.quarters.on && !c.quarters.complete {
		return true
	}
	return !c.aggComplete.IsZero() && c.earliestStart(c.now).Before(c.aggComplete)
}

// Backfill adds ledger rows (as recorded, priced) to the aggregates that
// lack them (NeedsHistory): rows older than what the aggregates hold, and
// every row to a zone new to them. Nothing else is touched (the rows were
// folded before). With done, the aggregates are complete again.
func (c *Core) Backfill(rows []ledger.Row, done bool) {
	from := c.earliestStart(c.now)
	for i := range rows {
		r := &rows[i]
		if r.Kind == ledger.KindStart || r.Decision == ledger.Refused || r.Decision == ledger.Passthrough && r.Free || upstreamRefused(r) || r.End.Before(from) {
			continue
		}
		c.backfillRow(r, rowAgg(r))
		if r.Replaced != nil && r.Kind == ledger.KindEnd {
			// The end of a call closed at its estimate replaces it.
			e, a := unfolded(r)
			c.backfillRow(&e, a)
		}
	}
	if done {
		for i := range c.zones {
			c.zones[i].complete = true
		}
		c.quarters.complete = c.quarters.on
		c.aggComplete, c.aggFromTime = from, from
		c.aggFrom = dayOf(from)
	}
}

// backfillRow adds a, the aggregate of r, where Backfill adds it.
func (c *Core) backfillRow(r *ledger.Row, a agg) {
	d := rowDims(r)
	if r.Decision == ledger.Passthrough {
		d.endpoint = c.passthroughEndpoint(d.endpoint)
	}
	day := dayOf(r.End)
	ad := c.aggBound(d, day)
	older := r.End.Before(c.aggComplete)
	if older {
		c.addAgg(ad, famUTC, day, a, r)
	}
	for zi, z := range c.zones {
		if older || !z.complete {
			c.addAgg(ad, famZone0+uint8(zi), calendar.StartIn(calendar.Day, r.End, z.loc).Unix(), a, r)
		}
	}
	if c.quarters.on && !c.quarters.complete && !r.End.Before(c.now.Add(-quarterKeep)) {
		c.addAgg(ad, famQuarter, floorDiv(r.End.Unix(), 900), a, r)
	}
}

// earliestStart is the earliest start of a current period of the plan (or
// of the UTC day, ISO week and month): the aggregates and the replay at
// start reach back to it.
func (c *Core) earliestStart(now time.Time) time.Time {
	s := earliestPeriodStart(now)
	for _, p := range c.periods {
		st := p.Start(now)
		if p.Rolling > 0 {
			st = p.Sliding().BucketStarts(now)[0]
		}
		if st.Before(s) {
			s = st
		}
	}
	return s
}

// currentPeriods is the store keys (without ids) of the current periods
// beyond the UTC day, week and month: every day bucket of a rolling
// window.
func (c *Core) currentPeriods(now time.Time) []store.Key {
	var out []store.Key
	for _, p := range c.periods {
		if p.Rolling > 0 {
			for _, s := range p.Sliding().BucketStarts(now) {
				out = append(out, keyOf(target{period: p}, s))
			}
			continue
		}
		out = append(out, keyOf(target{period: p}, now))
	}
	return out
}

// periodStarts is the current start of each period of the plan, to see
// a rollover.
func (c *Core) periodStarts(now time.Time) map[string]int64 {
	out := make(map[string]int64, len(c.periods))
	for id, p := range c.periods {
		out[id] = p.Start(now).Unix()
	}
	return out
}

// limitOf is the limit a counter identity (or a companion's) belongs to.
func (c *Core) limitOf(id string) *govern.Limit {
	if c.armed == nil {
		return nil
	}
	lid, _, _ := strings.Cut(id, "|")
	return c.armed.Plan.Limit(lid)
}

// rollingEntries turns the day buckets of the rolling windows among
// entries into the window's figures (see the top of the file), in place.
func (c *Core) rollingEntries(entries []syncwire.Entry, now time.Time) []syncwire.Entry {
	type window struct {
		l       *govern.Limit
		buckets map[int64]int64
	}
	var windows map[string]*window
	out := entries[:0]
	for _, e := range entries {
		l := c.limitOf(e.ID)
		if l == nil || l.Period.Rolling == 0 {
			out = append(out, e)
			continue
		}
		if windows == nil {
			windows = map[string]*window{}
		}
		w := windows[e.ID]
		if w == nil {
			w = &window{l: l, buckets: map[int64]int64{}}
			windows[e.ID] = w
		}
		w.buckets[e.PeriodStart.Unix()] += e.Value
	}
	for id, w := range windows {
		r := w.l.Period.Sliding()
		starts := r.BucketStarts(now)
		vals := make([]int64, len(starts))
		for i, s := range starts {
			vals[i] = w.buckets[s.Unix()]
		}
		cur := starts[len(starts)-1]
		full := int64(0)
		for _, v := range vals[1:] {
			full = sat.Add(full, v)
		}
		out = append(out, syncwire.Entry{ID: id, PeriodStart: cur, Value: full})
		if vals[0] > 0 {
			out = append(out, syncwire.Entry{ID: id + SlideSuffix, PeriodStart: cur, Value: vals[0]})
		}
		if strings.Contains(id, "#") {
			continue // a companion: no amount
		}
		amount := w.l.Amount
		if _, node, ok := govern.ParseIdentity(id); ok {
			if v, ok := c.armed.Override(w.l.ID, node); ok {
				amount = v
			}
		}
		if at := r.ResetsAt(vals, now, amount); at.After(now) {
			out = append(out, syncwire.Entry{ID: id + ResetsSuffix, PeriodStart: cur, Value: at.Unix()})
		}
	}
	return out
}
