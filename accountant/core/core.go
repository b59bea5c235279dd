// Package core owns the accountant's state machine: it takes batches of
// ledger rows and clock ticks, and gives back ingest outcomes, the
// LedgerSettled counter snapshot the filters read, and threshold alert
// events. It reads no clock and does no I/O of its own (time is a parameter
// of every method, the counters live behind store.Store), so the same
// inputs always produce the same outputs; the server, the durable ledger
// and replay at start are a thin edge around it.
//
// What it does with a batch (seed 002):
//
//  1. Validate each row; a bad row is rejected alone with its reason.
//  2. Deduplicate by request id: a retried batch never counts twice (see
//     dedup for the retention window).
//  3. Price the row through the catalog unless it already carries a cost
//     (a replayed row keeps the cost it was recorded with); an unknown model
//     is UNPRICED.
//  4. Skip refused and passthrough rows before the fold: they are
//     recorded, never counted.
//  5. Fold: resolve the row's instances at gate 2 with the armed plan,
//     keep the LedgerSettled ones, and add to each instance's counter for
//     the calendar period the row's end time falls in: budget_usd adds the
//     priced cost (an UNPRICED row adds nothing), quota_tokens adds input +
//     output, quota_requests adds one. A budget_usd limit in reserve mode
//     also adds the priced cost to a companion counter per filter replica
//     (syncwire.ReplicaSuffix), for the rows that name their replica.
//  6. Raise one alert per instance, threshold and period when a counter
//     crosses a posture.thresholds fraction of its amount.
//
// Re-arming (a reload, a runtime change) re-derives every counter from
// per-day aggregates of the rows of the current periods, so a new or edited
// limit counts history exactly as govern preview does.
//
// A Core is not safe for concurrent use; the server serialises calls.
package core

import (
	"context"
	"time"

	"github.com/tokentriage/tokentriage/accountant/pricing"
	"github.com/tokentriage/tokentriage/accountant/store"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// Defaults of Options.
const (
	DefaultDedupWindow = 48 * time.Hour
	DefaultDedupMaxIDs = 4 << 20
	// DefaultMaxRowAhead and DefaultMaxRowLag bound how far a row's end
	// may lie after, or before, the accountant's clock when it arrives;
	// past them the row is re-dated (see redate.go).
	DefaultMaxRowAhead = 5 * time.Minute
	DefaultMaxRowLag   = 15 * time.Minute
	// maxResolveCache bounds the resolution cache; past it the cache is
	// cleared and refilled.
	maxResolveCache = 1 << 16
	// maxReplicaIDs bounds the table of interned replica ids.
	maxReplicaIDs = 1 << 12
)

// Options configure a Core.
type Options struct {
	// Pricing prices rows that arrive without a cost. Nil: pricing.Default().
	Pricing *pricing.Catalog
	// Store holds the counters. Nil: a new store.Local.
	Store store.Store
	// DedupWindow is how far back of now request ids are always
	// remembered. Zero: DefaultDedupWindow.
	DedupWindow time.Duration
	// DedupMaxIDs bounds the request ids held. Zero: DefaultDedupMaxIDs.
	DedupMaxIDs int
	// VersionPrefix makes snapshot versions unique across restarts (the
	// server passes its start time); versions are VersionPrefix + "." + n.
	VersionPrefix string
	// MaxRowAhead and MaxRowLag bound the skew of a live row's end from
	// now (redate.go). Zero: DefaultMaxRowAhead, DefaultMaxRowLag;
	// negative: unbounded (tests that replay history as live).
	MaxRowAhead, MaxRowLag time.Duration
}

// Core is the accountant's state machine. The zero value is not usable;
// call New.
type Core struct {
	opts  Options
	ctx   context.Context
	armed *govern.Armed
	now   time.Time

	resolved map[dims][]target
	aggs     map[aggKey]*agg
	// distinct holds, per instance and period of a limit that keeps one
	// counter per value, the values that have a counter of their own.
	distinct map[distinctKey]map[string]struct{}
	// distinctLimit is the limit of each instance base in distinct.
	distinctLimit map[string]*govern.Limit
	// aggSeen and aggBounds bound the values of each day's aggregates
	// (aggBound).
	aggSeen   map[int64]*aggSeen
	aggBounds [3]int64
	aggFrom   int64 // first Unix day whose aggregates are kept
	// aggFromTime is the earliest start of a current period of the plan
	// (earliestStart): the aggregates of every family reach back to it.
	// aggComplete is how far back they hold every row (a plan that reaches
	// further back needs the ledger's older rows: NeedsHistory).
	aggFromTime, aggComplete time.Time
	// zones are the time zones of the plan's periods, periods its periods
	// beyond the UTC day, week and month (by identity), periodStart the
	// current start of each, to see a rollover (period.go).
	zones       []zoneFam
	quarters    quarterFam
	periods     map[string]govern.Period
	periodStart map[string]int64
	// replicaIDs interns the filter replica ids the aggregates hold.
	replicaIDs map[string]string
	dedup      *dedup
	// admitted holds the rows admitted under each tag until their commit
	// is durable (Commit) or failed (Abort).
	admitted map[uint64]*pendingBatch
	// open are the calls in flight whose start was recorded, by request
	// (open.go); estimated the estimates closes counted, for a late end.
	open      map[requestKey]*openCall
	estimated map[requestKey]estimate
	// prunedHour is the Unix hour of the last dedup prune
	prunedHour int64
	fired      map[alertKey]struct{}

	// snapshot state
	dirty       bool
	version     uint64
	generatedAt time.Time
	snap        syncwire.Snapshot
	starts      [4]int64 // current period starts seen at the last tick

	stats Stats
	// storeErr is the last store failure; the next tick rebuilds the
	// store from the aggregates and clears it.
	storeErr error
	pending  []Alert // alerts of the last re-derivation

	// scratch, reused across batches
	deltas  []store.Delta
	targets []target
	values  []int64
	buf     []govern.Instance
}

// Stats are running totals since New.
type Stats struct {
	Accepted   int64 // rows newly recorded
	Duplicates int64 // rows already recorded
	Rejected   int64 // unreadable or too-old rows
	Refused    int64 // recorded rows skipped before the fold
	// Passthrough counts recorded passthrough rows (forwarded ungoverned;
	// the free ones skipped before the fold).
	Passthrough int64
	// Redated counts live rows re-dated to the accountant's clock.
	Redated int64
	// Starts counts recorded start rows of calls in flight, Closes the
	// calls closed at their estimate, OpenDropped the starts not held open
	// because maxOpen were.
	Starts, Closes, OpenDropped int64
	Unpriced                    int64 // recorded rows whose model has no price
	Folded                      int64 // rows folded into at least the aggregates
	// UpstreamRefused counts forwarded rows the upstream refused (a 4xx
	// or 5xx) with nothing spent: recorded, folded into no counter.
	UpstreamRefused int64
	// Overflowed counts the folds of a row into an overflow counter (its
	// value past a limit's max_distinct).
	Overflowed int64
	Alerts     int64
	// DedupIDs is the number of request ids held; DedupHorizon the
	// earliest row end time that can still be deduplicated.
	DedupIDs     int
	DedupHorizon time.Time
}

// New returns a Core armed with nothing: rows are recorded and aggregated
// but no counter exists until Arm.
func New(opts Options) *Core {
	if opts.Pricing == nil {
		opts.Pricing = pricing.Default()
	}
	if opts.Store == nil {
		opts.Store = store.NewLocal()
	}
	if opts.DedupWindow <= 0 {
		opts.DedupWindow = DefaultDedupWindow
	}
	if opts.DedupMaxIDs <= 0 {
		opts.DedupMaxIDs = DefaultDedupMaxIDs
	}
	if opts.MaxRowAhead == 0 {
		opts.MaxRowAhead = DefaultMaxRowAhead
	}
	if opts.MaxRowLag == 0 {
		opts.MaxRowLag = DefaultMaxRowLag
	}
	c := &Core{
		opts:          opts,
		ctx:           context.Background(),
		resolved:      map[dims][]target{},
		distinct:      map[distinctKey]map[string]struct{}{},
		distinctLimit: map[string]*govern.Limit{},
		aggSeen:       map[int64]*aggSeen{},
		aggBounds:     [3]int64{aggModelsPerDay, aggCustomersPerDay, aggTagSetsPerDay},
		aggs:          map[aggKey]*agg{},
		replicaIDs:    map[string]string{},
		dedup:         newDedup(opts.DedupMaxIDs),
		admitted:      map[uint64]*pendingBatch{},
		open:          map[requestKey]*openCall{},
		estimated:     map[requestKey]estimate{},
		fired:         map[alertKey]struct{}{},
		dirty:         true,
	}
	c.dedup.horizon = -1 << 62
	return c
}

// Armed returns the plan the core folds with, or nil.
func (c *Core) Armed() *govern.Armed { return c.armed }

// Stats returns the running totals.
func (c *Core) Stats() Stats {
	s := c.stats
	s.DedupIDs = c.dedup.len()
	s.DedupHorizon = time.Unix(c.dedup.horizon*3600, 0).UTC()
	if c.dedup.horizon < -1<<40 {
		s.DedupHorizon = time.Time{}
	}
	return s
}

// ReplayFrom returns the earliest row end time the core needs at start to
// rebuild its state exactly: the earlier of now − DedupWindow and the start
// of the earliest current calendar period.
func (c *Core) ReplayFrom(now time.Time) time.Time {
	from := now.Add(-c.opts.DedupWindow)
	if p := c.earliestStart(now); p.Before(from) {
		from = p
	}
	return time.Unix(hourOf(from)*3600, 0).UTC()
}
