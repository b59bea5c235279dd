package core

import (
	"sort"
	"time"

	"github.com/tokentriage/tokentriage/accountant/store"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/sat"
)

// Arm makes armed the plan the core folds with (nil disarms) and re-derives
// every counter of the current periods from the aggregates of the rows
// recorded so far, so a new limit, an edited one, a new runtime node or an
// override counts history exactly as govern preview would. Counters are
// keyed by identity, never by amount, so editing an amount keeps the
// usage. Crossings the re-derived counters show that were never raised
// before are returned as alerts (a lowered amount or a new threshold is
// news); ones raised before are not repeated.
func (c *Core) Arm(now time.Time, armed *govern.Armed) ([]Alert, error) {
	// The plan first: its periods say how far back the aggregates and the
	// deduplication reach (a year's limit keeps the year's rows).
	c.armed = armed
	clear(c.resolved)
	c.setAggBounds()
	c.armPeriods()
	c.advance(now)
	if err := c.rederive(now, true); err != nil {
		return nil, err
	}
	return c.pending, nil
}

// rederive rebuilds the store from the aggregates with the armed plan.
func (c *Core) rederive(now time.Time, live bool) error {
	c.pending = c.pending[:0]
	type sum struct {
		t target
		v int64
	}
	sums := map[store.Key]*sum{}
	// Which values of each per-value instance keep counters of their own:
	// the first to arrive, up to max_distinct.
	firsts := map[distinctKey]map[string]int64{}
	limits := map[distinctKey]*govern.Limit{}
	for k, a := range c.aggs {
		at := bucketTime(k.fam, k.bucket)
		for _, t := range c.resolve(k.d) {
			if t.base == "" || t.id == t.overflow || c.famOf(t.period) != k.fam || amountOf(t.limit, *a) == 0 && a.unpriced == 0 && a.estimated == 0 {
				continue
			}
			dk := distinctKeyOf(t.base, keyOf(t, at))
			ids := firsts[dk]
			if ids == nil {
				ids = map[string]int64{}
				firsts[dk], limits[dk] = ids, t.limit
			}
			if f, ok := ids[t.id]; !ok || a.first < f {
				ids[t.id] = a.first
			}
		}
	}
	c.admitDistinct(firsts, limits)
	for k, a := range c.aggs {
		at := bucketTime(k.fam, k.bucket)
		add := func(t target, n int64) {
			key := keyOf(t, at)
			s := sums[key]
			if s == nil {
				s = &sum{t: t}
				sums[key] = s
			}
			s.v = sat.Add(s.v, n)
		}
		for _, t := range c.resolve(k.d) {
			if c.famOf(t.period) != k.fam {
				continue // counted from another family's aggregates
			}
			if t.base != "" && t.id != t.overflow {
				dk := distinctKeyOf(t.base, keyOf(t, at))
				if _, own := c.distinct[dk][t.id]; !own {
					t = t.as(t.overflow)
				}
			}
			if a.unpriced > 0 && t.limit.Type == govern.BudgetUSD {
				add(t.unpricedTarget(), a.unpriced)
			}
			if a.estimated > 0 && t.limit.Type == govern.BudgetUSD {
				add(t.estimatedTarget(), a.estimated)
			}
			if n := amountOf(t.limit, *a); n != 0 { // as the fold: nothing to add, no counter
				add(t, n)
				if t.reserve() {
					for _, rn := range a.replicas {
						if n := amountOf(t.limit, rn.agg); n != 0 {
							add(t.replicaTarget(rn.replica), n)
						}
					}
				}
			}
		}
	}
	counters := make([]store.Counter, 0, len(sums))
	for k, s := range sums {
		counters = append(counters, store.Counter{Key: k, Value: s.v})
	}
	if err := c.opts.Store.Replace(c.ctx, counters); err != nil {
		c.storeErr = err
		return err
	}
	c.storeErr = nil
	c.markChanged(now)
	// Alerts in a stable order: by identity, then period.
	sort.Slice(counters, func(i, j int) bool {
		if counters[i].Key.ID != counters[j].Key.ID {
			return counters[i].Key.ID < counters[j].Key.ID
		}
		return counters[i].Key.Start < counters[j].Key.Start
	})
	for _, ctr := range counters {
		s := sums[ctr.Key]
		for _, th := range s.t.limit.Thresholds {
			if govern.Crossed(0, s.v, s.t.amount, th) {
				if a, ok := c.raise(s.t, th, ctr.Key, s.v, now, live); ok {
					c.pending = append(c.pending, a)
				}
			}
		}
	}
	return nil
}
