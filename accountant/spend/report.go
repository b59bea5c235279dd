package spend

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// Values are what a set of rows adds up to. Dollars are exact decimals on
// the nanodollar grid, in three figures never summed into one: PricedUSD
// (provider-reported usage at the catalog's price), EstimatedUSD (usage the
// filter estimated because the provider reported none, priced) and the
// UNPRICED rows, whose dollars are unknown and which are counted by
// requests and tokens instead. Tokens count every forwarded row, UNPRICED
// ones included.
type Values struct {
	Requests          int64      `json:"requests"`
	Admitted          int64      `json:"admitted"`
	Refused           int64      `json:"refused"`
	ShadowRefused     int64      `json:"shadow_refused"`
	SoftBreach        int64      `json:"soft_breach"`
	InputTokens       int64      `json:"input_tokens"`
	OutputTokens      int64      `json:"output_tokens"`
	CachedInputTokens int64      `json:"cached_input_tokens"`
	ReasoningTokens   int64      `json:"reasoning_tokens"`
	PricedUSD         config.USD `json:"priced_usd"`
	PricedRequests    int64      `json:"priced_requests"`
	EstimatedUSD      config.USD `json:"estimated_usd"`
	EstimatedRequests int64      `json:"estimated_requests"`
	UnpricedRequests  int64      `json:"unpriced_requests"`
	UnpricedTokens    int64      `json:"unpriced_tokens"`
}

// kind is what decides where a cell's sums go in Values.
type kind struct {
	decision ledger.Decision
	cost     CostClass
}

func (v *Values) addCell(k kind, s *Sums) {
	v.Requests = addSat(v.Requests, s.Requests)
	switch k.decision {
	case ledger.Admitted:
		v.Admitted = addSat(v.Admitted, s.Requests)
	case ledger.Refused:
		v.Refused = addSat(v.Refused, s.Requests)
	case ledger.ShadowRefused:
		v.ShadowRefused = addSat(v.ShadowRefused, s.Requests)
	case ledger.SoftBreach:
		v.SoftBreach = addSat(v.SoftBreach, s.Requests)
	}
	v.InputTokens = addSat(v.InputTokens, s.Input)
	v.OutputTokens = addSat(v.OutputTokens, s.Output)
	v.CachedInputTokens = addSat(v.CachedInputTokens, s.CachedInput)
	v.ReasoningTokens = addSat(v.ReasoningTokens, s.Reasoning)
	switch k.cost {
	case Priced:
		v.PricedUSD.Nanos = addSat(v.PricedUSD.Nanos, s.Nanos)
		v.PricedRequests = addSat(v.PricedRequests, s.Requests)
	case Estimated:
		v.EstimatedUSD.Nanos = addSat(v.EstimatedUSD.Nanos, s.Nanos)
		v.EstimatedRequests = addSat(v.EstimatedRequests, s.Requests)
	case Unpriced:
		v.UnpricedRequests = addSat(v.UnpricedRequests, s.Requests)
		v.UnpricedTokens = addSat(v.UnpricedTokens, addSat(s.Input, s.Output))
	}
}

// Add adds o to v.
func (v *Values) Add(o *Values) {
	v.Requests = addSat(v.Requests, o.Requests)
	v.Admitted = addSat(v.Admitted, o.Admitted)
	v.Refused = addSat(v.Refused, o.Refused)
	v.ShadowRefused = addSat(v.ShadowRefused, o.ShadowRefused)
	v.SoftBreach = addSat(v.SoftBreach, o.SoftBreach)
	v.InputTokens = addSat(v.InputTokens, o.InputTokens)
	v.OutputTokens = addSat(v.OutputTokens, o.OutputTokens)
	v.CachedInputTokens = addSat(v.CachedInputTokens, o.CachedInputTokens)
	v.ReasoningTokens = addSat(v.ReasoningTokens, o.ReasoningTokens)
	v.PricedUSD.Nanos = addSat(v.PricedUSD.Nanos, o.PricedUSD.Nanos)
	v.PricedRequests = addSat(v.PricedRequests, o.PricedRequests)
	v.EstimatedUSD.Nanos = addSat(v.EstimatedUSD.Nanos, o.EstimatedUSD.Nanos)
	v.EstimatedRequests = addSat(v.EstimatedRequests, o.EstimatedRequests)
	v.UnpricedRequests = addSat(v.UnpricedRequests, o.UnpricedRequests)
	v.UnpricedTokens = addSat(v.UnpricedTokens, o.UnpricedTokens)
}

// spent is the dollars a group is ranked by: priced and estimated (both
// count against a budget), never UNPRICED.
func (v *Values) spent() int64 { return addSat(v.PricedUSD.Nanos, v.EstimatedUSD.Nanos) }

// Point is the values of one bucket.
type Point struct {
	Start time.Time `json:"start"`
	Values
}

// Group is one group of a report: its key (the grouped dims' values), its
// total over the range and its non-empty buckets.
type Group struct {
	Key map[string]string `json:"key"`
	// Other marks the group that sums every group past top=; Groups says
	// how many it sums.
	Other  bool    `json:"other,omitempty"`
	Groups int     `json:"groups,omitempty"`
	Total  Values  `json:"total"`
	Series []Point `json:"series"`
}

// Source says what a report was computed from.
type Source struct {
	// Rows is every row the rollup holds (in or out of the report's range);
	// First and Last the earliest and latest row end among them. All three
	// are absent from a delegated admin's report.
	Rows  int64      `json:"rows,omitempty"`
	First *time.Time `json:"first,omitempty"`
	Last  *time.Time `json:"last,omitempty"`
	// HourlyFrom is the earliest instant hourly buckets can report (older
	// days are kept as daily sums); absent when every hour is kept.
	HourlyFrom *time.Time `json:"hourly_from,omitempty"`
	// Ledgers is how many ledgers were read (one for an accountant);
	// Duplicates the rows found in more than one of them, each counted
	// once.
	Ledgers    int   `json:"ledgers"`
	Duplicates int64 `json:"duplicates"`
}

// Report is the answer to a Query.
type Report struct {
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Bucket  string    `json:"bucket"`
	GroupBy []string  `json:"group_by"`
	// Node is the subtree reported on ("" everything); Scope the subtree
	// the caller may see ("" everything).
	Node    string              `json:"node,omitempty"`
	Scope   string              `json:"scope,omitempty"`
	Filters map[string][]string `json:"filters,omitempty"`
	Top     int                 `json:"top,omitempty"`
	// GeneratedAt is when the report was made; it holds every row the
	// accountant acknowledged before then.
	GeneratedAt time.Time `json:"generated_at"`
	Source      Source    `json:"source"`
	// Buckets are the start of every bucket of the range, in order. The
	// first may start before From and the last end after To; only rows in
	// [From, To) are counted.
	Buckets []time.Time `json:"buckets"`
	Total   Values      `json:"total"`
	// Series is the total of each non-empty bucket.
	Series []Point `json:"series"`
	// Groups are ordered by dollars spent (priced plus estimated), then
	// UNPRICED tokens, then requests, most first; empty without group_by.
	Groups []Group `json:"groups"`
	Note   string  `json:"note"`
}

// Note is the note of every report.
const Note = "dollars are exact on the nanodollar grid and kept in three figures never summed into one: priced_usd (usage the provider reported), estimated_usd (usage the gateway estimated, priced) and the unpriced_requests and unpriced_tokens of models with no price; rows a gateway has not flushed to its accountant yet are not counted"

// ScopeError is a report asked for a node outside the caller's subtree.
type ScopeError struct {
	Node, Scope string
}

func (e *ScopeError) Error() string {
	return fmt.Sprintf("node %q is outside the subtree %s this token may see", e.Node, e.Scope)
}

// Run answers q over the rollup for a caller that sees the subtree at
// scope ("" for everything): rows owned outside it, anonymous rows
// included, are left out. A q.Node outside scope is a *ScopeError; an
// hourly bucket, or a range edge off a day boundary, before the rollup's
// hourly window is a *QueryError. now stamps the report.
func (r *Rollup) Run(q Query, scope string, now time.Time) (*Report, error) {
	node := q.Node
	switch {
	case scope != "" && node == "":
		node = scope
	case scope != "" && !runtime.InSubtree(scope, node):
		return nil, &ScopeError{Node: node, Scope: scope}
	}
	rep := &Report{From: q.From.UTC(), To: q.To.UTC(), Bucket: q.Bucket.String(), GroupBy: []string{},
		Node: q.Node, Scope: scope, Top: q.Top, GeneratedAt: now.UTC(), Note: Note,
		Series: []Point{}, Groups: []Group{}}
	if rep.Node == "" && scope != "" {
		rep.Node = scope
	}
	for _, d := range q.GroupBy {
		rep.GroupBy = append(rep.GroupBy, d.String())
	}
	for d, vals := range q.Filters {
		if rep.Filters == nil {
			rep.Filters = map[string][]string{}
		}
		rep.Filters[d.String()] = vals
	}
	for s := q.Bucket.start(q.From); s.Before(q.To); s = q.Bucket.next(s) {
		rep.Buckets = append(rep.Buckets, s)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	r.foldLocked()
	rep.Source = Source{Rows: r.rows, Ledgers: 1}
	if scope != "" {
		// How much traffic the rest of the tree had is not the scope's
		// business.
		rep.Source.Rows = 0
	} else if !r.first.IsZero() {
		f, l := r.first.UTC(), r.last.UTC()
		rep.Source.First, rep.Source.Last = &f, &l
	}
	hf := r.hourlyFromLocked()
	if !hf.IsZero() {
		rep.Source.HourlyFrom = &hf
		if err := checkDaily(q, hf); err != nil {
			return nil, err
		}
	}

	a := aggregator{q: &q, node: node, rep: rep, memo: make([]int32, len(r.dims)), kinds: make([]kind, len(r.dims)),
		groupOf: map[string]int32{}}
	for i := range a.memo {
		a.memo[i] = memoUnset
	}
	fromH, toH := floorDiv(q.From.Unix(), 3600), floorDiv(q.To.Unix(), 3600)
	hours := func(from, to int64) {
		for h := from; h < to; h++ {
			if s := r.hours[h]; s != nil {
				a.slot(r, s, time.Unix(h*3600, 0).UTC())
			}
		}
	}
	if q.Bucket == Hour {
		hours(fromH, toH)
	} else {
		// Whole days from their daily cells, the hours of a day the range
		// cuts from the hourly ones.
		firstDay, endDay := floorDiv(fromH+23, 24), floorDiv(toH, 24)
		if firstDay >= endDay {
			hours(fromH, toH)
		} else {
			hours(fromH, firstDay*24)
			for d := firstDay; d < endDay; d++ {
				if s := r.days[d]; s != nil {
					a.slot(r, s, time.Unix(d*86400, 0).UTC())
				}
			}
			hours(endDay*24, toH)
		}
	}
	if a.tooMany {
		return nil, &QueryError{Problems: []string{fmt.Sprintf("grouped by %s over %d %s buckets, the report has more than %d group-buckets; ask for fewer dims, a wider bucket, a shorter range or a narrower node",
			strings.Join(rep.GroupBy, ","), len(rep.Buckets), rep.Bucket, MaxAnswer)}}
	}
	a.finish()
	return rep, nil
}

// checkDaily refuses what daily cells cannot answer exactly: hourly
// buckets before hf, and a range edge off midnight before hf.
func checkDaily(q Query, hf time.Time) error {
	var probs []string
	if q.Bucket == Hour && q.From.Before(hf) {
		probs = append(probs, fmt.Sprintf("bucket hour reaches back to %s, but hours before %s are kept as daily sums; start at %s or later, or ask for bucket=day",
			q.From.Format(time.RFC3339), hf.Format(time.RFC3339), hf.Format(time.RFC3339)))
	}
	for _, e := range []struct {
		name string
		t    time.Time
	}{{"from", q.From}, {"to", q.To}} {
		if e.t.Before(hf) && !e.t.Equal(calendar0(e.t)) {
			probs = append(probs, fmt.Sprintf("%s %s falls inside a day kept as one daily sum (hours before %s are merged into days); give a date, or a time at midnight UTC",
				e.name, e.t.Format(time.RFC3339), hf.Format(time.RFC3339)))
		}
	}
	if len(probs) > 0 {
		return &QueryError{Problems: probs}
	}
	return nil
}

func calendar0(t time.Time) time.Time { return Day.start(t) }

const (
	memoUnset = -2 // dims not looked at yet
	memoOut   = -1 // dims filtered out
)

// aggregator sums the cells of a report.
type aggregator struct {
	q    *Query
	node string
	rep  *Report
	// memo is, per dims id, the group index or memoOut/memoUnset; kinds
	// the dims' kind.
	memo    []int32
	kinds   []kind
	groupOf map[string]int32
	keys    [][]string // values of each group's dims
	// vals[g][b] is the sum of group g in bucket b, nil while empty
	vals    [][]*Values
	tooMany bool // the groups × buckets passed MaxAnswer
}

// MaxAnswer bounds groups × buckets in one report.
const MaxAnswer = 4_000_000

func (a *aggregator) slot(r *Rollup, s *slot, t time.Time) {
	b := sort.Search(len(a.rep.Buckets), func(i int) bool { return a.rep.Buckets[i].After(t) }) - 1
	if b < 0 {
		return
	}
	for i := range s.cells {
		c := &s.cells[i]
		g := a.memo[c.dims]
		if g == memoUnset {
			g = a.classify(&r.dims[c.dims])
			a.memo[c.dims] = g
			a.kinds[c.dims] = kind{decision: r.dims[c.dims].Decision, cost: r.dims[c.dims].Cost}
		}
		if g == memoOut {
			continue
		}
		v := a.vals[g][b]
		if v == nil {
			v = &Values{}
			a.vals[g][b] = v
		}
		v.addCell(a.kinds[c.dims], &c.sums)
	}
}

// classify returns the group of a dims, or memoOut when the query leaves
// it out.
func (a *aggregator) classify(d *Dims) int32 {
	if a.node != "" && !runtime.InSubtree(a.node, d.Node) {
		return memoOut
	}
	for dim, vals := range a.q.Filters {
		v := dim.value(d)
		ok := false
		for _, w := range vals {
			if v == w {
				ok = true
				break
			}
		}
		if !ok {
			return memoOut
		}
	}
	key := make([]string, len(a.q.GroupBy))
	for i, dim := range a.q.GroupBy {
		key[i] = dim.value(d)
	}
	s := strings.Join(key, "\x00")
	g, ok := a.groupOf[s]
	if !ok {
		if (len(a.keys)+1)*len(a.rep.Buckets) > MaxAnswer {
			a.tooMany = true
			return memoOut
		}
		g = int32(len(a.keys))
		a.groupOf[s] = g
		a.keys = append(a.keys, key)
		a.vals = append(a.vals, make([]*Values, len(a.rep.Buckets)))
	}
	return g
}

// finish turns the sums into the report's groups and series.
func (a *aggregator) finish() {
	rep := a.rep
	groups := make([]Group, len(a.keys))
	series := make([]Values, len(rep.Buckets))
	used := make([]bool, len(rep.Buckets))
	for g, vs := range a.vals {
		for b, v := range vs {
			if v != nil {
				groups[g].Total.Add(v)
				series[b].Add(v)
				used[b] = true
			}
		}
	}
	for b := range rep.Buckets {
		if used[b] {
			rep.Total.Add(&series[b])
			rep.Series = append(rep.Series, Point{Start: rep.Buckets[b], Values: series[b]})
		}
	}
	if len(a.q.GroupBy) == 0 {
		return
	}
	for g := range groups {
		groups[g].Key = map[string]string{}
		for i, dim := range a.q.GroupBy {
			groups[g].Key[dim.String()] = a.keys[g][i]
		}
	}
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(i, j int) bool { return ranksBefore(&groups[order[i]], &groups[order[j]], a.q.GroupBy) })
	keep := order
	if a.q.Top > 0 && len(order) > a.q.Top {
		keep = order[:a.q.Top]
	}
	// Series only for the groups reported; those past top= are summed
	// bucket by bucket into one.
	out := make([]Group, 0, len(keep)+1)
	for _, g := range keep {
		grp := groups[g]
		grp.Series = []Point{}
		for b, v := range a.vals[g] {
			if v != nil {
				grp.Series = append(grp.Series, Point{Start: rep.Buckets[b], Values: *v})
			}
		}
		out = append(out, grp)
	}
	if len(keep) < len(order) {
		other := Group{Key: map[string]string{}, Other: true, Groups: len(order) - len(keep), Series: []Point{}}
		vals := make([]Values, len(rep.Buckets))
		hit := make([]bool, len(rep.Buckets))
		for _, g := range order[len(keep):] {
			other.Total.Add(&groups[g].Total)
			for b, v := range a.vals[g] {
				if v != nil {
					vals[b].Add(v)
					hit[b] = true
				}
			}
		}
		for b := range rep.Buckets {
			if hit[b] {
				other.Series = append(other.Series, Point{Start: rep.Buckets[b], Values: vals[b]})
			}
		}
		out = append(out, other)
	}
	groups = out
	rep.Groups = groups
}

// ranksBefore orders groups: dollars spent, UNPRICED tokens, requests,
// most first, then by key.
func ranksBefore(x, y *Group, dims []Dim) bool {
	if a, b := x.Total.spent(), y.Total.spent(); a != b {
		return a > b
	}
	if a, b := x.Total.UnpricedTokens, y.Total.UnpricedTokens; a != b {
		return a > b
	}
	if a, b := x.Total.Requests, y.Total.Requests; a != b {
		return a > b
	}
	for _, d := range dims {
		if a, b := x.Key[d.String()], y.Key[d.String()]; a != b {
			return a < b
		}
	}
	return false
}

// IsQueryError reports whether err is a query that cannot be answered.
func IsQueryError(err error) bool {
	var qe *QueryError
	return errors.As(err, &qe)
}
