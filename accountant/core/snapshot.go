package core

import (
	"maps"
	"sort"
	"strconv"
	"time"

	"github.com/tokentriage/tokentriage/accountant/store"
	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// HeartbeatInterval is how often the server ticks the core; every tick
// refreshes the snapshot's GeneratedAt even when no counter changed.
const HeartbeatInterval = 5 * time.Second

// Tick advances the core to now: a period that ended makes the snapshot
// change (the new period starts at zero), the dedup horizon and the
// aggregates move forward, ended periods' counters are dropped, and the
// snapshot's GeneratedAt becomes now. After a store failure the tick
// rebuilds the store from the aggregates and returns the alerts that
// rebuild raised; it returns an error when the store still fails.
func (c *Core) Tick(now time.Time) ([]Alert, error) {
	c.advance(now)
	c.generatedAt = now
	from := c.ReplayFrom(now)
	c.dedup.prune(hourOf(from), hourOf(now)-1)
	c.pruneEstimates()
	for k := range c.aggs {
		if k.fam == famQuarter && bucketTime(k.fam, k.bucket).Before(now.Add(-quarterKeep)) {
			delete(c.aggs, k)
		}
	}
	if from := c.earliestStart(now); from.After(c.aggFromTime) {
		c.aggFromTime = from
		c.aggComplete = from
		for k := range c.aggs {
			// A zone's day bucket starts up to a day from the UTC one.
			if k.fam >= famZone0 && bucketTime(k.fam, k.bucket).Before(from.Add(-24*time.Hour)) {
				delete(c.aggs, k)
			}
		}
	}
	if day := dayOf(c.aggFromTime); day > c.aggFrom {
		c.aggFrom = day
		for k := range c.aggs {
			if k.fam == famUTC && k.bucket < day {
				delete(c.aggs, k)
			}
		}
		for d := range c.aggSeen {
			if d < day {
				delete(c.aggSeen, d)
			}
		}
		clear(c.replicaIDs) // ids still held stay valid; new rows intern afresh
		for k := range c.fired {
			if k.start < day*86400 {
				delete(c.fired, k)
			}
		}
	}
	if err := c.opts.Store.Expire(c.ctx, now); err != nil {
		return nil, err
	}
	c.expireDistinct(now)
	if c.storeErr != nil {
		if err := c.rederive(now, true); err != nil {
			return nil, err
		}
		return c.pending, nil
	}
	return nil, nil
}

// advance moves the core's clock forward (never back) and notes a period
// rollover.
func (c *Core) advance(now time.Time) {
	if now.After(c.now) {
		c.now = now
	}
	for _, u := range []calendar.Unit{calendar.Day, calendar.Week, calendar.Month} {
		if s := calendar.Start(u, c.now).Unix(); s != c.starts[u] {
			c.starts[u] = s
			c.dirty = true
		}
	}
	if !c.now.IsZero() {
		starts := c.periodStarts(c.now)
		if !maps.Equal(starts, c.periodStart) {
			// A period of the plan rolled over (or the plan's periods
			// changed): a new snapshot, and the shared store reads the
			// new periods' totals.
			c.periodStart = starts
			c.dirty = true
			if p, ok := c.opts.Store.(store.Periods); ok {
				p.SetPeriods(c.currentPeriods(c.now))
			}
		}
		if from := c.earliestStart(c.now); c.aggFromTime.IsZero() || from.Before(c.aggFromTime) {
			// A plan reaching further back keeps what it has from there on
			// (and NeedsHistory says the older rows are missing).
			c.aggFromTime = from
		}
		if c.aggComplete.IsZero() || len(c.aggs) == 0 && c.stats.Folded == 0 {
			// Before any row, the replay at start brings every row from
			// ReplayFrom on.
			c.aggComplete = c.earliestStart(c.now)
		}
	}
	if c.aggFrom == 0 && !c.now.IsZero() {
		c.aggFrom = dayOf(c.aggFromTime)
	}
	if h := hourOf(c.now); h != c.prunedHour {
		c.prunedHour = h
		c.dedup.prune(hourOf(c.ReplayFrom(c.now)), h-1)
	}
}

// Touch marks the snapshot changed without a row: the counter store's
// values moved on their own (another accountant's totals, read from the
// fleet's Redis), or whether they can be trusted did.
func (c *Core) Touch(now time.Time) { c.markChanged(now) }

func (c *Core) markChanged(now time.Time) {
	c.dirty = true
	if now.After(c.generatedAt) {
		c.generatedAt = now
	}
}

// Snapshot returns every LedgerSettled counter of the current periods,
// sorted by identity. The version changes only when a counter changed, a
// period rolled over or the plan was re-armed since the last call, so
// changes between two polls coalesce into one version. A counter that is
// absent reads as zero. The returned value shares memory with the core's
// cache: callers must not modify it.
func (c *Core) Snapshot() (syncwire.Snapshot, error) {
	if c.dirty {
		cs, err := c.opts.Store.Current(c.ctx, c.now)
		if err != nil {
			return syncwire.Snapshot{}, err
		}
		entries := make([]syncwire.Entry, 0, len(cs))
		for _, k := range cs {
			entries = append(entries, syncwire.Entry{ID: k.Key.ID, PeriodStart: k.Key.PeriodStart(), Value: k.Value})
		}
		entries = c.rollingEntries(entries, c.now)
		entries = c.distinctEntries(c.now, entries)
		sort.Slice(entries, func(i, j int) bool {
			if entries[i].ID != entries[j].ID {
				return entries[i].ID < entries[j].ID
			}
			return entries[i].PeriodStart.Before(entries[j].PeriodStart)
		})
		c.version++
		c.snap = syncwire.Snapshot{Version: c.versionString(), Entries: entries}
		c.dirty = false
	}
	s := c.snap
	s.GeneratedAt = c.generatedAt
	return s, nil
}

func (c *Core) versionString() string {
	v := strconv.FormatUint(c.version, 10)
	if c.opts.VersionPrefix != "" {
		v = c.opts.VersionPrefix + "." + v
	}
	return v
}
