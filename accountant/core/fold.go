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

// dims is what resolution reads from a row: the chain's inputs and the
// match dims (tags in govern.JoinTags form).
type dims struct {
	node, kid, model, provider, endpoint, customer, tags string
}

func rowDims(r *ledger.Row) dims {
	return dims{node: r.Node, kid: r.KID, model: r.Sent(), provider: r.Provider, endpoint: r.Endpoint,
		customer: r.Customer, tags: govern.JoinTags(r.Tags)}
}

// clone copies the strings of d, so a map key never shares memory with an
// ingest body (rows may alias the request they came in).
func (d dims) clone() dims {
	return dims{node: strings.Clone(d.node), kid: strings.Clone(d.kid), model: strings.Clone(d.model),
		provider: strings.Clone(d.provider), endpoint: strings.Clone(d.endpoint),
		customer: strings.Clone(d.customer), tags: strings.Clone(d.tags)}
}

// target is one LedgerSettled instance a row folds into.
type target struct {
	limit  *govern.Limit
	node   string
	id     string // counter identity
	period govern.Period
	amount int64
	// base and overflow, for a limit that keeps one counter per value:
	// its instance's govern.DistinctBase and overflow counter; "" else.
	base, overflow string
}

// as is t folded into the counter id (its own, or its overflow counter).
func (t target) as(id string) target {
	t.id = id
	return t
}

// unpricedTarget is the companion counter of a budget_usd target: the
// UNPRICED rows folded into it (syncwire.UnpricedSuffix). It raises no
// threshold alert.
func (t target) unpricedTarget() target {
	return target{limit: &companionLimit, node: t.node, id: t.id + syncwire.UnpricedSuffix, period: t.period}
}

// estimatedTarget is the companion counter of a budget_usd target: the
// rows with estimated usage folded into it (syncwire.EstimatedSuffix). It
// raises no threshold alert.
func (t target) estimatedTarget() target {
	return target{limit: &companionLimit, node: t.node, id: t.id + syncwire.EstimatedSuffix, period: t.period}
}

// reserve reports whether t is a target in reserve mode (budget_usd,
// quota_tokens or quota_requests), whose rows are also counted per filter
// replica.
func (t target) reserve() bool {
	return t.limit.Reserve
}

// replicaTarget is the companion counter of a reserve-mode target for one
// filter replica: what that replica's rows folded into it
// (syncwire.ReplicaSuffix). It raises no threshold alert.
func (t target) replicaTarget(replica string) target {
	return target{limit: &companionLimit, node: t.node, id: t.id + syncwire.ReplicaSuffix + replica, period: t.period}
}

// companionLimit stands for the limit of a companion counter: no
// thresholds, no amount.
var companionLimit govern.Limit

// agg sums the forwarded rows of one dims on one UTC day: every calendar
// period is a union of UTC days, so these sums re-derive any counter of the
// current periods exactly.
type agg struct {
	rows   int64
	tokens int64 // input + output
	// input and output apart, for quota_tokens limits counting one
	// (metric:)
	input, output int64
	nanos         int64 // priced cost; UNPRICED rows add nothing
	unpriced      int64 // UNPRICED rows
	// estimated counts the rows whose usage was estimated (ledger.Estimated)
	estimated int64
	// first is the end (Unix ns) of the earliest of the rows: the values of
	// a per-value limit that came first keep counters of their own when a
	// re-derivation applies max_distinct.
	first int64
	// replicas splits the sums by the filter replica that wrote the rows
	// (rows with no replica id are left out), so the companions of a
	// reserve-mode limit re-derive exactly, also for a limit that a re-arm
	// has just put in reserve mode. It is kept for every aggregate, a few
	// dozen bytes per replica (the ids are interned), rather than
	// splitting the aggregates themselves by replica.
	replicas []replicaAgg
}

// replicaAgg is the sums of one filter replica's rows (its own replicas
// left empty).
type replicaAgg struct {
	replica string
	agg     agg
}

// plus adds the sums of o (not its replicas) to a.
func (a *agg) plus(o agg) {
	a.rows = sat.Add(a.rows, o.rows)
	a.tokens = sat.Add(a.tokens, o.tokens)
	a.input = sat.Add(a.input, o.input)
	a.output = sat.Add(a.output, o.output)
	a.nanos = sat.Add(a.nanos, o.nanos)
	a.unpriced = sat.Add(a.unpriced, o.unpriced)
	a.estimated = sat.Add(a.estimated, o.estimated)
}

// addReplica adds the sums of o to replica's share of a.
func (a *agg) addReplica(replica string, o agg) {
	o.replicas = nil
	for i := range a.replicas {
		if a.replicas[i].replica == replica {
			a.replicas[i].agg.plus(o)
			return
		}
	}
	a.replicas = append(a.replicas, replicaAgg{replica: replica, agg: o})
}

type aggKey struct {
	d      dims
	fam    uint8 // famUTC, famQuarter or a zone's (period.go)
	bucket int64 // a Unix day (famUTC), a quarter hour, or a zone's day start
}

func dayOf(t time.Time) int64 { return floorDiv(t.Unix(), 86400) }

// amountOf is what a row adds to a counter of limit l: its cost, its
// tokens (those l's metric counts), or its requests.
func amountOf(l *govern.Limit, a agg) int64 {
	switch l.Type {
	case govern.BudgetUSD:
		return a.nanos
	case govern.QuotaTokens:
		switch l.Metric {
		case govern.MetricInput:
			return a.input
		case govern.MetricOutput:
			return a.output
		}
		return a.tokens
	case govern.QuotaRequests:
		return a.rows
	}
	return 0
}

// rowAgg is one forwarded row as an aggregate (a summary is its requests).
func rowAgg(r *ledger.Row) agg {
	in, out := max(r.Usage.Input, 0), max(r.Usage.Output, 0)
	a := agg{rows: r.Requests(), tokens: sat.Add(in, out), input: in, output: out}
	if r.Cost != nil && !r.Cost.Unpriced {
		a.nanos = r.Cost.Nanos
	}
	if r.Cost != nil && r.Cost.Unpriced {
		a.unpriced = 1
	}
	if r.Estimated.Input || r.Estimated.Output {
		a.estimated = 1
	}
	return a
}

// resolve returns the LedgerSettled instances a row of dims d folds into.
func (c *Core) resolve(d dims) []target {
	if c.armed == nil {
		return nil
	}
	if ts, ok := c.resolved[d]; ok {
		return ts
	}
	if len(c.resolved) >= maxResolveCache {
		clear(c.resolved)
	}
	c.buf = c.armed.Resolve(govern.Chain(d.node, d.kid),
		govern.Dims{Model: d.model, Provider: d.provider, Endpoint: d.endpoint, Customer: d.customer, Tags: d.tags}, govern.Gate2, c.buf[:0])
	var ts []target
	for _, in := range c.buf {
		l := in.Limit
		if l == nil || l.Type.Class() != govern.LedgerSettled || !l.Period.Counted() {
			continue
		}
		t := target{limit: l, node: in.Node, id: in.ID, period: l.Period, amount: in.Amount}
		if l.PerValue() {
			t.base, t.overflow = govern.DistinctBase(l, in.Node), govern.OverflowIdentity(l, in.Node)
		}
		ts = append(ts, t)
	}
	c.resolved[d.clone()] = ts
	return ts
}

// fold adds one forwarded row to the aggregates and appends its counter
// deltas (and their targets) to the scratch slices.
func (c *Core) fold(r *ledger.Row) {
	c.stats.Folded++
	c.foldAgg(r, rowAgg(r))
}

// unfold takes out of the aggregates and counters the estimate a late end
// replaces (r.Replaced, with the end's dims): the close that counted it.
func (c *Core) unfold(r *ledger.Row) {
	e, a := unfolded(r)
	c.foldAgg(&e, a)
}

// unfolded is the close a late end r replaces, and its aggregate negated.
func unfolded(r *ledger.Row) (ledger.Row, agg) {
	e := *r
	e.End, e.Usage, e.Cost, e.Kind = r.Replaced.End, r.Replaced.Usage, r.Replaced.Cost, ledger.KindClose
	e.Estimated = ledger.Estimated{Input: true, Output: true}
	a := rowAgg(&e)
	a.rows, a.tokens, a.nanos, a.unpriced, a.estimated = -a.rows, -a.tokens, -a.nanos, -a.unpriced, -a.estimated
	a.input, a.output = -a.input, -a.output
	return e, a
}

// foldAgg adds a, the aggregate of r (negative to take one out), to the
// aggregates and appends its counter deltas.
func (c *Core) foldAgg(r *ledger.Row, a agg) {
	d := rowDims(r)
	if r.Decision == ledger.Passthrough {
		d.endpoint = c.passthroughEndpoint(d.endpoint)
	}
	day := dayOf(r.End)
	ad := c.aggBound(d, day)
	if day >= c.aggFrom {
		c.addAgg(ad, famUTC, day, a, r)
	}
	if c.quarters.on && !r.End.Before(c.now.Add(-quarterKeep)) {
		c.addAgg(ad, famQuarter, floorDiv(r.End.Unix(), 900), a, r)
	}
	for i, z := range c.zones {
		if s := calendar.StartIn(calendar.Day, r.End, z.loc); !s.Before(c.aggFromTime) {
			c.addAgg(ad, famZone0+uint8(i), s.Unix(), a, r)
		}
	}
	for _, t := range c.resolve(d) {
		key := keyOf(t, r.End)
		t = t.as(c.counterID(t, key))
		at := func(id string) store.Key { k := key; k.ID = id; return k }
		if a.unpriced != 0 && t.limit.Type == govern.BudgetUSD {
			u := t.unpricedTarget()
			c.deltas = append(c.deltas, store.Delta{Key: at(u.id), N: a.unpriced})
			c.targets = append(c.targets, u)
		}
		if a.estimated != 0 && t.limit.Type == govern.BudgetUSD {
			u := t.estimatedTarget()
			c.deltas = append(c.deltas, store.Delta{Key: at(u.id), N: a.estimated})
			c.targets = append(c.targets, u)
		}
		n := amountOf(t.limit, a)
		if n == 0 && t.limit.Type != govern.QuotaRequests {
			continue
		}
		c.deltas = append(c.deltas, store.Delta{Key: at(t.id), N: n})
		c.targets = append(c.targets, t)
		if t.reserve() && r.Replica != "" {
			// n is what the row adds to the counter.
			rt := t.replicaTarget(r.Replica)
			c.deltas = append(c.deltas, store.Delta{Key: at(rt.id), N: n})
			c.targets = append(c.targets, rt)
		}
	}
}

// addAgg adds a, the aggregate of row r, to the bucket of dims d in
// family fam.
func (c *Core) addAgg(d dims, fam uint8, bucket int64, a agg, r *ledger.Row) {
	k := aggKey{d: d, fam: fam, bucket: bucket}
	p := c.aggs[k]
	if p == nil {
		p = &agg{}
		c.aggs[aggKey{d: d.clone(), fam: fam, bucket: bucket}] = p
	}
	p.plus(a)
	if end := r.End.UnixNano(); a.rows > 0 && (p.first == 0 || end < p.first) {
		p.first = end
	}
	if fam == famUTC && r.Replica != "" {
		// Reserve mode counts UTC periods only: one family holds it.
		p.addReplica(c.intern(r.Replica), a)
	}
}

// passthroughEndpoint is the endpoint dim a passthrough row folds under:
// its path when a limit of the plan matches that path exactly, else ""
// (which matches the same limits: those that constrain no endpoint). A
// passthrough path is whatever the caller sent, and made-up paths must
// not grow the aggregates; a limit added later on such a path counts the
// rows that arrive after it.
func (c *Core) passthroughEndpoint(path string) string {
	if c.armed == nil {
		return ""
	}
	for _, l := range c.armed.Plan.Limits {
		if l.Match.Endpoint == path {
			return path
		}
	}
	return ""
}

// intern returns a copy of the replica id s that the aggregates share, so
// it never aliases an ingest body and is held once however many
// aggregates name it. The table is cleared when it grows past
// maxReplicaIDs (made-up ids) and when a tick drops ended days.
func (c *Core) intern(s string) string {
	if v, ok := c.replicaIDs[s]; ok {
		return v
	}
	if len(c.replicaIDs) >= maxReplicaIDs {
		clear(c.replicaIDs)
	}
	v := strings.Clone(s)
	c.replicaIDs[v] = v
	return v
}

// earliestPeriodStart is the earliest start among the current day, ISO
// week and month.
func earliestPeriodStart(now time.Time) time.Time {
	s := calendar.Start(calendar.Day, now)
	for _, u := range []calendar.Unit{calendar.Week, calendar.Month} {
		if p := calendar.Start(u, now); p.Before(s) {
			s = p
		}
	}
	return s
}
