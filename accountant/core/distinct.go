package core

import (
	"sort"
	"time"

	"strings"

	"github.com/tokentriage/tokentriage/accountant/store"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// A limit that keeps one counter per value of a dim (a model, customer or
// tag pattern) keeps at most max_distinct counters per instance and
// period: the first values to arrive get counters of their own, and every
// later value is folded into the instance's overflow counter
// (govern.OverflowIdentity). The snapshot says how many counters of their
// own an instance has (<base>#distinct), so the gateway judges a value
// without one by the overflow counter once the instance is full.

// distinctKey names one instance's values in one period (for a rolling
// window, one day bucket).
type distinctKey struct {
	base       string // govern.DistinctBase
	start, end int64  // the period's, Unix s
}

func distinctKeyOf(base string, k store.Key) distinctKey {
	return distinctKey{base: base, start: k.Start, end: k.PeriodEnd().Unix()}
}

// counterID is the identity a row of target t with store key k is folded
// into: t's own, or its overflow counter when t's value has none and the
// instance is full.
func (c *Core) counterID(t target, key store.Key) string {
	if t.base == "" || t.id == t.overflow {
		return t.id
	}
	k := distinctKeyOf(t.base, key)
	set := c.distinct[k]
	if _, ok := set[t.id]; ok {
		return t.id
	}
	if int64(len(set)) >= t.limit.MaxDistinct {
		c.stats.Overflowed++
		return t.overflow
	}
	if set == nil {
		set = map[string]struct{}{}
		c.distinct[k] = set
	}
	set[t.id] = struct{}{}
	c.distinctLimit[t.base] = t.limit
	c.dirty = true // the instance's #distinct changed
	return t.id
}

// The aggregates keep, per UTC day, at most so many distinct values of
// each dim a caller chooses (a model, a customer, a tag set), and sum the
// rest under "*" (govern.Overflow), which resolves to a per-value limit's
// overflow counter: a re-derivation gives the first values of each day
// their own counters, and a period's first max_distinct values are among
// its days' first ones, so the bound is at least the largest max_distinct
// of the plan (and 100,000 customers, 10,000 models or tag sets).
const (
	aggModelsPerDay    = 10_000
	aggCustomersPerDay = 100_000
	aggTagSetsPerDay   = 10_000
)

// aggSeen is one UTC day's values of the bounded dims in the aggregates.
type aggSeen struct {
	model, customer, tags map[string]struct{}
}

// aggBound returns d with the values its day has no room for replaced by
// govern.Overflow.
func (c *Core) aggBound(d dims, day int64) dims {
	s := c.aggSeen[day]
	if s == nil {
		s = &aggSeen{model: map[string]struct{}{}, customer: map[string]struct{}{}, tags: map[string]struct{}{}}
		c.aggSeen[day] = s
	}
	keep := func(set map[string]struct{}, v *string, max int64) {
		if *v == "" {
			return
		}
		if _, ok := set[*v]; ok {
			return
		}
		if int64(len(set)) >= max {
			*v = govern.Overflow
			return
		}
		set[strings.Clone(*v)] = struct{}{}
	}
	keep(s.model, &d.model, c.aggBounds[0])
	keep(s.customer, &d.customer, c.aggBounds[1])
	keep(s.tags, &d.tags, c.aggBounds[2])
	return d
}

// setAggBounds sets the aggregates' bounds for the armed plan.
func (c *Core) setAggBounds() {
	c.aggBounds = [3]int64{aggModelsPerDay, aggCustomersPerDay, aggTagSetsPerDay}
	if c.armed == nil {
		return
	}
	for _, l := range c.armed.Plan.Limits {
		if !l.PerValue() {
			continue
		}
		d := l.InstanceDims(govern.Dims{Model: govern.Overflow, Customer: govern.Overflow}, govern.Overflow)
		for i, per := range [3]bool{d.Model == govern.Overflow, d.Customer == govern.Overflow, d.Tags == govern.Overflow} {
			if per {
				c.aggBounds[i] = max(c.aggBounds[i], l.MaxDistinct)
			}
		}
	}
}

// expireDistinct drops the value sets of periods that ended at or before
// t.
func (c *Core) expireDistinct(t time.Time) {
	for k := range c.distinct {
		if k.end <= t.Unix() {
			delete(c.distinct, k)
		}
	}
	if len(c.distinct) == 0 {
		clear(c.distinctLimit)
	}
}

// distinctEntries are the snapshot's #distinct entries: how many counters
// of their own each per-value instance has in each current period. A
// limit whose bound is max_distinct's default for a model pattern has its
// entry only once it is full (the gateway needs no more), so the snapshot
// of a plan of earlier releases is as it was until then.
func (c *Core) distinctEntries(now time.Time, out []syncwire.Entry) []syncwire.Entry {
	for k, set := range c.distinct {
		if s := now.Unix(); s < k.start || s >= k.end {
			continue
		}
		if l := c.distinctLimit[k.base]; l == nil || l.DisclosedMaxDistinct() == 0 && int64(len(set)) < l.MaxDistinct {
			continue
		}
		out = append(out, syncwire.Entry{ID: k.base + syncwire.DistinctSuffix, PeriodStart: time.Unix(k.start, 0).UTC(), Value: int64(len(set))})
	}
	return out
}

// admitDistinct decides, for a re-derivation, which values of each
// per-value instance have a counter of their own: the first max_distinct
// to arrive (by the earliest row of each), the rest fold into the
// overflow counter. firsts maps each instance and period to its values'
// first arrivals.
func (c *Core) admitDistinct(firsts map[distinctKey]map[string]int64, limits map[distinctKey]*govern.Limit) {
	clear(c.distinct)
	clear(c.distinctLimit)
	for k, ids := range firsts {
		type v struct {
			id    string
			first int64
		}
		vs := make([]v, 0, len(ids))
		for id, f := range ids {
			vs = append(vs, v{id, f})
		}
		sort.Slice(vs, func(i, j int) bool {
			if vs[i].first != vs[j].first {
				return vs[i].first < vs[j].first
			}
			return vs[i].id < vs[j].id
		})
		n := min(int64(len(vs)), limits[k].MaxDistinct)
		set := make(map[string]struct{}, n)
		for _, x := range vs[:n] {
			set[x.id] = struct{}{}
		}
		c.distinct[k] = set
		c.distinctLimit[k.base] = limits[k]
	}
}
