// Package spend owns cost analytics: who spent what, over time. Its
// Rollup sums ledger rows into cells of one hour (or, past the hourly
// window, one UTC day) by every attribute a report can group or filter on,
// so a report over a month reads cells, never rows; Run answers a Query
// over it (grouped by node at any depth, key, model, provider, endpoint,
// the limit that refused, bucketed by hour, day, ISO week or month), and
// the report is written as JSON or CSV. Build reads one or several ledgers
// into a Rollup, counting a row that several ledgers hold once, by its
// request id. Limits lists the live LedgerSettled counters beside their
// amounts, for the dashboard's "near their thresholds".
//
// Priced, estimated and UNPRICED amounts are kept apart everywhere: a cell
// knows which of the three its rows were, and a report shows three figures,
// never one sum that hides the other two.
package spend

import (
	"math"
	"strings"
	"sync"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/sat"
)

// CostClass says how a row's dollars are known.
type CostClass uint8

const (
	// NoCost: a refused row, never forwarded; it costs nothing.
	NoCost CostClass = iota
	// Priced: the provider's usage at the catalog's price.
	Priced
	// Estimated: priced, but from usage the filter estimated (the provider
	// reported none).
	Estimated
	// Unpriced: the model has no price; the row's dollars are unknown.
	Unpriced
)

// classOf is the cost class of a row as recorded.
func classOf(r *ledger.Row) CostClass {
	switch {
	case r.Cost == nil:
		return NoCost
	case r.Cost.Unpriced:
		return Unpriced
	case r.Cost.Estimated:
		return Estimated
	}
	return Priced
}

// Dims are the attributes of a row that a report groups and filters by.
// Rows with equal Dims that end in the same hour share one cell.
type Dims struct {
	Node      string // owner node of the key; "" anonymous
	KID       string
	Model     string // as requested
	Served    string // as the provider reported
	Provider  string
	Endpoint  string
	Decision  ledger.Decision
	ErrorType string // error.type of a refusal
	Limit     string // refused_by.limit_id
	LimitType string // refused_by.limit_type
	Cost      CostClass
	Customer  string // the request's customer
	Tags      string // its tags, sorted, joined by ","
}

func dimsOf(r *ledger.Row) Dims {
	d := Dims{Node: r.Node, KID: r.KID, Model: r.Sent(), Served: r.Served, Provider: r.Provider,
		Endpoint: r.Endpoint, Decision: r.Decision, ErrorType: r.ErrorType, Cost: classOf(r),
		Customer: r.Customer, Tags: govern.JoinTags(r.Tags)}
	if r.RefusedBy != nil {
		d.Limit, d.LimitType = r.RefusedBy.LimitID, r.RefusedBy.LimitType
	}
	return d
}

// Sums are what the rows of a cell add up to.
type Sums struct {
	Requests    int64
	Input       int64
	Output      int64
	CachedInput int64
	Reasoning   int64
	Nanos       int64 // the rows' cost; 0 for Unpriced and NoCost cells
}

func (s *Sums) add(o *Sums) {
	s.Requests = sat.Add(s.Requests, o.Requests)
	s.Input = sat.Add(s.Input, o.Input)
	s.Output = sat.Add(s.Output, o.Output)
	s.CachedInput = sat.Add(s.CachedInput, o.CachedInput)
	s.Reasoning = sat.Add(s.Reasoning, o.Reasoning)
	s.Nanos = sat.Add(s.Nanos, o.Nanos)
}

// sumsOf is what a row adds to its cell: a summary counts as its requests.
func sumsOf(r *ledger.Row) Sums {
	s := Sums{Requests: r.Requests(), Input: max(r.Usage.Input, 0), Output: max(r.Usage.Output, 0),
		CachedInput: max(r.Usage.CachedInput, 0), Reasoning: max(r.Usage.Reasoning, 0)}
	if r.Cost != nil && !r.Cost.Unpriced {
		s.Nanos = max(r.Cost.Nanos, 0)
	}
	return s
}

// DefaultHourlyDays is how many days back of now a Rollup keeps hourly
// cells by default; older hours are merged into one cell per day.
const DefaultHourlyDays = 35

// Options configure a Rollup.
type Options struct {
	// HourlyDays is how many whole UTC days before the current one keep
	// hourly cells once Compact runs; earlier days keep daily cells.
	// Zero: DefaultHourlyDays. Negative: every hour is kept (Compact
	// does nothing).
	HourlyDays int
}

// Rollup is the spend of a ledger in cells of one hour or one day. It is
// safe for concurrent use: Enqueue never waits for a report, and a report
// folds what was enqueued before it reads, so it sees every row enqueued
// before it started.
type Rollup struct {
	opts Options

	// pmu guards pending only, so Enqueue (the ingest path) never waits
	// for a report holding mu.
	pmu     sync.Mutex
	pending []batch
	wake    chan struct{}

	mu    sync.Mutex
	dims  []Dims
	index map[Dims]uint32
	// Every row is summed twice: in its hour's cells (for days from
	// hourlyFrom on) and in its UTC day's cells (always), so a report by
	// day, week or month reads one cell per dims and day, not 24.
	hours map[int64]*slot // Unix hour → cells
	days  map[int64]*slot // Unix day → cells
	// hourlyFrom is the first Unix day whose rows are kept hourly.
	hourlyFrom int64
	rows       int64
	// feeds counts the rows of each filter replica (ledger.Row.Replica):
	// a fleet report finds by it the replicas whose rows reached two
	// accountants.
	feeds map[string]int64
	first time.Time // earliest row end
	last  time.Time // latest row end
	// last dims looked up, since consecutive rows often share them
	lastDims Dims
	lastID   uint32
	haveLast bool
	// seen bounds the values callers choose (models, customers, tags)
	// each UTC day keeps cells for (distinctBounds).
	seen map[int64]*daySeen
}

// The values a UTC day keeps cells for, by dim: a caller chooses them (a
// made-up model name, a new customer id), so without a bound a flood of
// distinct ones would grow the rollup without limit. Past the bound, a
// day's rows of a new value are summed under "*" (govern.Overflow), which
// a report shows like any other value: the totals stay whole.
const (
	maxModelsPerDay    = 10_000
	maxCustomersPerDay = 100_000
	maxTagSetsPerDay   = 10_000
	// seenDays is how many days back a day's values are remembered; a
	// later row of an older day starts its set afresh.
	seenDays = 3
)

// daySeen is one UTC day's values of the bounded dims.
type daySeen struct {
	model, served, customer, tags map[string]struct{}
}

// bound replaces, in d, the values a row's day has no room for.
func (r *Rollup) bound(d *Dims, day int64) {
	if r.seen == nil {
		r.seen = map[int64]*daySeen{}
	}
	s := r.seen[day]
	if s == nil {
		for k := range r.seen {
			if k < day-seenDays {
				delete(r.seen, k)
			}
		}
		s = &daySeen{model: map[string]struct{}{}, served: map[string]struct{}{}, customer: map[string]struct{}{}, tags: map[string]struct{}{}}
		r.seen[day] = s
	}
	keep := func(set map[string]struct{}, v *string, max int) {
		if *v == "" {
			return
		}
		if _, ok := set[*v]; ok {
			return
		}
		if len(set) >= max {
			*v = govern.Overflow
			return
		}
		set[strings.Clone(*v)] = struct{}{}
	}
	keep(s.model, &d.Model, maxModelsPerDay)
	keep(s.served, &d.Served, maxModelsPerDay)
	keep(s.customer, &d.Customer, maxCustomersPerDay)
	keep(s.tags, &d.Tags, maxTagSetsPerDay)
}

// batch is a set of rows enqueued together: the rows at the indices where
// keep is true (every row when keep is nil).
type batch struct {
	rows []ledger.Row
	keep func(i int) bool
}

// slot is the cells of one hour or one day. index finds a cell by its dims
// while rows still arrive for the slot; it is dropped once the slot is
// old (Compact) and rebuilt if a late row comes.
type slot struct {
	cells []cell
	index map[uint32]int32
}

type cell struct {
	dims uint32
	sums Sums
}

func (s *slot) cell(d uint32) *Sums {
	if s.index == nil {
		s.index = make(map[uint32]int32, len(s.cells))
		for i, c := range s.cells {
			s.index[c.dims] = int32(i)
		}
	}
	if i, ok := s.index[d]; ok {
		return &s.cells[i].sums
	}
	s.index[d] = int32(len(s.cells))
	s.cells = append(s.cells, cell{dims: d})
	return &s.cells[len(s.cells)-1].sums
}

// New returns an empty Rollup.
func New(opts Options) *Rollup {
	if opts.HourlyDays == 0 {
		opts.HourlyDays = DefaultHourlyDays
	}
	return &Rollup{
		opts:       opts,
		wake:       make(chan struct{}, 1),
		index:      map[Dims]uint32{},
		feeds:      map[string]int64{},
		hours:      map[int64]*slot{},
		days:       map[int64]*slot{},
		hourlyFrom: math.MinInt64,
	}
}

// Add sums rows into the rollup now.
func (r *Rollup) Add(rows []ledger.Row) {
	r.mu.Lock()
	r.addLocked(rows, nil)
	r.mu.Unlock()
}

// Enqueue hands rows to the rollup without waiting for it: the rows at
// the indices where keep is true (every row when keep is nil). They are
// summed by Fold, or by the next report, whichever comes first. The caller
// must not modify rows afterwards.
func (r *Rollup) Enqueue(rows []ledger.Row, keep func(i int) bool) {
	if len(rows) == 0 {
		return
	}
	r.pmu.Lock()
	r.pending = append(r.pending, batch{rows: rows, keep: keep})
	r.pmu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Wake is signalled after Enqueue; a goroutine that calls Fold when it
// fires keeps reports from doing the folding themselves.
func (r *Rollup) Wake() <-chan struct{} { return r.wake }

// Fold sums every enqueued row.
func (r *Rollup) Fold() {
	r.mu.Lock()
	r.foldLocked()
	r.mu.Unlock()
}

func (r *Rollup) foldLocked() {
	for {
		r.pmu.Lock()
		p := r.pending
		r.pending = nil
		r.pmu.Unlock()
		if len(p) == 0 {
			return
		}
		for _, b := range p {
			r.addLocked(b.rows, b.keep)
		}
	}
}

func (r *Rollup) addLocked(rows []ledger.Row, keep func(int) bool) {
	for i := range rows {
		if keep != nil && !keep(i) {
			continue
		}
		row := &rows[i]
		if row.End.IsZero() || row.Free || row.Kind == ledger.KindStart {
			// A free call (the model list, a token count) bills nothing
			// and is no request to report: its row is in the ledger only.
			// A start counts nothing: its end or its close does.
			continue
		}
		if p := row.Replaced; p != nil && row.Kind == ledger.KindEnd {
			r.takeOut(row, p)
		}
		d := dimsOf(row)
		r.bound(&d, floorDiv(row.End.Unix(), 86400))
		var id uint32
		if r.haveLast && d == r.lastDims {
			id = r.lastID
		} else {
			var ok bool
			if id, ok = r.index[d]; !ok {
				d = d.clone()
				id = uint32(len(r.dims))
				r.dims = append(r.dims, d)
				r.index[d] = id
			}
			r.lastDims, r.lastID, r.haveLast = d, id, true
		}
		s := sumsOf(row)
		h := floorDiv(row.End.Unix(), 3600)
		day := floorDiv(h, 24)
		getSlot(r.days, day).cell(id).add(&s)
		if day >= r.hourlyFrom {
			getSlot(r.hours, h).cell(id).add(&s)
		}
		r.rows++
		if n, ok := r.feeds[row.Replica]; ok {
			r.feeds[row.Replica] = n + 1
		} else {
			r.feeds[strings.Clone(row.Replica)] = 1
		}
		if r.first.IsZero() || row.End.Before(r.first) {
			r.first = row.End
		}
		if row.End.After(r.last) {
			r.last = row.End
		}
	}
}

// takeOut subtracts from its cell the estimate a late end replaces: the
// close that counted the call, with the end's dims.
func (r *Rollup) takeOut(row *ledger.Row, p *ledger.Replaced) {
	e := *row
	e.End, e.Usage, e.Cost, e.Kind, e.Replaced = p.End, p.Usage, p.Cost, ledger.KindClose, nil
	d := dimsOf(&e)
	id, ok := r.index[d]
	if !ok {
		return // the close is not in this rollup: nothing to take out
	}
	s := sumsOf(&e)
	s = Sums{Requests: -s.Requests, Input: -s.Input, Output: -s.Output, CachedInput: -s.CachedInput, Reasoning: -s.Reasoning, Nanos: -s.Nanos}
	h := floorDiv(e.End.Unix(), 3600)
	day := floorDiv(h, 24)
	if sl := r.days[day]; sl != nil {
		sl.cell(id).add(&s)
	}
	if sl := r.hours[h]; sl != nil && day >= r.hourlyFrom {
		sl.cell(id).add(&s)
	}
}

func getSlot(m map[int64]*slot, k int64) *slot {
	s := m[k]
	if s == nil {
		s = &slot{}
		m[k] = s
	}
	return s
}

func (d Dims) clone() Dims {
	return Dims{Node: strings.Clone(d.Node), KID: strings.Clone(d.KID), Model: strings.Clone(d.Model),
		Served: strings.Clone(d.Served), Provider: strings.Clone(d.Provider), Endpoint: strings.Clone(d.Endpoint),
		Decision: ledger.Decision(strings.Clone(string(d.Decision))), ErrorType: strings.Clone(d.ErrorType),
		Limit: strings.Clone(d.Limit), LimitType: strings.Clone(d.LimitType), Cost: d.Cost,
		Customer: strings.Clone(d.Customer), Tags: strings.Clone(d.Tags)}
}

// Compact drops the hourly cells of days more than HourlyDays before
// now's day (their daily cells stay), and the lookup index of hours and
// days that ended a while ago (a late row rebuilds it). Reports with
// hourly buckets, or range edges off midnight, can then start no earlier
// than HourlyFrom.
func (r *Rollup) Compact(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.foldLocked()
	nowHour := floorDiv(now.Unix(), 3600)
	for h, s := range r.hours {
		if h < nowHour-2 {
			s.index = nil
		}
	}
	for d, s := range r.days {
		if d < floorDiv(nowHour, 24)-1 {
			s.index = nil
		}
	}
	if r.opts.HourlyDays < 0 {
		return
	}
	from := floorDiv(nowHour, 24) - int64(r.opts.HourlyDays)
	if from <= r.hourlyFrom {
		return
	}
	r.hourlyFrom = from
	for h := range r.hours {
		if floorDiv(h, 24) < from {
			delete(r.hours, h)
		}
	}
}

// HourlyFrom is the earliest instant hourly buckets can report; the zero
// time when every hour is kept.
func (r *Rollup) HourlyFrom() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hourlyFromLocked()
}

func (r *Rollup) hourlyFromLocked() time.Time {
	if r.hourlyFrom == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(r.hourlyFrom*86400, 0).UTC()
}

// Merge adds every cell of o into r. o must not be used concurrently.
func (r *Rollup) Merge(o *Rollup) {
	o.Fold()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.foldLocked()
	ids := make([]uint32, len(o.dims))
	for i, d := range o.dims {
		id, ok := r.index[d]
		if !ok {
			id = uint32(len(r.dims))
			r.dims = append(r.dims, d)
			r.index[d] = id
		}
		ids[i] = id
	}
	r.hourlyFrom = max(r.hourlyFrom, o.hourlyFrom)
	for h := range r.hours {
		if floorDiv(h, 24) < r.hourlyFrom {
			delete(r.hours, h) // o has no hours for these days
		}
	}
	for k, s := range o.hours {
		if floorDiv(k, 24) < r.hourlyFrom {
			continue
		}
		dst := getSlot(r.hours, k)
		for _, c := range s.cells {
			dst.cell(ids[c.dims]).add(&c.sums)
		}
	}
	for k, s := range o.days {
		dst := getSlot(r.days, k)
		for _, c := range s.cells {
			dst.cell(ids[c.dims]).add(&c.sums)
		}
	}
	r.rows = sat.Add(r.rows, o.rows)
	for f, n := range o.feeds {
		r.feeds[f] += n
	}
	if !o.first.IsZero() && (r.first.IsZero() || o.first.Before(r.first)) {
		r.first = o.first
	}
	if o.last.After(r.last) {
		r.last = o.last
	}
	r.haveLast = false
}

// Stats describe what a rollup holds.
type Stats struct {
	Rows        int64     // rows summed
	First, Last time.Time // earliest and latest row end
	Cells       int       // hourly and daily cells
	Dims        int       // distinct Dims
}

// Stats returns what the rollup holds, after folding what was enqueued.
func (r *Rollup) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.foldLocked()
	st := Stats{Rows: r.rows, First: r.first, Last: r.last, Dims: len(r.dims)}
	for _, s := range r.hours {
		st.Cells += len(s.cells)
	}
	for _, s := range r.days {
		st.Cells += len(s.cells)
	}
	return st
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
