package spend

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/sat"
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

// Add adds o to v.
func (v *Values) Add(o *Values) {
	v.Requests = sat.Add(v.Requests, o.Requests)
	v.Admitted = sat.Add(v.Admitted, o.Admitted)
	v.Refused = sat.Add(v.Refused, o.Refused)
	v.ShadowRefused = sat.Add(v.ShadowRefused, o.ShadowRefused)
	v.SoftBreach = sat.Add(v.SoftBreach, o.SoftBreach)
	v.InputTokens = sat.Add(v.InputTokens, o.InputTokens)
	v.OutputTokens = sat.Add(v.OutputTokens, o.OutputTokens)
	v.CachedInputTokens = sat.Add(v.CachedInputTokens, o.CachedInputTokens)
	v.ReasoningTokens = sat.Add(v.ReasoningTokens, o.ReasoningTokens)
	v.PricedUSD.Nanos = sat.Add(v.PricedUSD.Nanos, o.PricedUSD.Nanos)
	v.PricedRequests = sat.Add(v.PricedRequests, o.PricedRequests)
	v.EstimatedUSD.Nanos = sat.Add(v.EstimatedUSD.Nanos, o.EstimatedUSD.Nanos)
	v.EstimatedRequests = sat.Add(v.EstimatedRequests, o.EstimatedRequests)
	v.UnpricedRequests = sat.Add(v.UnpricedRequests, o.UnpricedRequests)
	v.UnpricedTokens = sat.Add(v.UnpricedTokens, o.UnpricedTokens)
}

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
	// Replicas, in a fleet report, says of every accountant of the fleet
	// whether it answered (Ledgers counts those that did); Missing counts
	// those that did not.
	Replicas []ReplicaAnswer `json:"replicas,omitempty"`
	Missing  int             `json:"missing,omitempty"`
	// Overlaps lists filter replicas whose rows are in more than one
	// accountant's ledger: a request of theirs may be counted twice
	// (tokentriage spend --log over those ledgers counts it once).
	Overlaps []Overlap `json:"overlaps,omitempty"`
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
	// KeyNames names the keys of a report grouped by key that have a
	// name, by kid (the management API fills it from the runtime plane).
	KeyNames map[string]string `json:"key_names,omitempty"`
	// Fleet marks a report over every accountant of a fleet; Partial one
	// some of them did not answer (Source.Replicas says which): its
	// figures leave their ledgers out.
	Fleet   bool   `json:"fleet,omitempty"`
	Partial bool   `json:"partial,omitempty"`
	Note    string `json:"note"`
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
//
// A report with top= reads the range twice: once for every group's total,
// which ranks them, then for the series of the groups kept and of the
// rest summed, so its working set is (top+1) × buckets, not groups ×
// buckets.
func (r *Rollup) Run(q Query, scope string, now time.Time) (*Report, error) {
	rep, node, err := newReport(q, scope, now)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.foldLocked()
	if err := r.sourceLocked(rep, q, scope); err != nil {
		return nil, err
	}
	sc := r.scanner(&q, node, rep.Buckets)
	t := &table{nb: len(rep.Buckets)}
	if q.Top > 0 && len(q.GroupBy) > 0 {
		rk := sc.ranks()
		order := rankGroups(sc.keys, rk)
		k := min(q.Top, len(order))
		rowOf := make([]int32, len(order))
		for i, g := range order {
			rowOf[g] = int32(min(i, k))
		}
		if !sc.series(t, func(g int32) int32 { return rowOf[g] }) {
			return nil, tooMany(rep)
		}
		kept := make([]RowGroup, k)
		for i, g := range order[:k] {
			kept[i] = RowGroup{Key: sc.keys[g], Total: t.rowTotal(i), Row: i}
		}
		var other *RowGroup
		if k < len(order) {
			other = &RowGroup{Row: k, Groups: len(order) - k, Total: t.rowTotal(k)}
		}
		rep.fill(&q, t, kept, other)
		return rep, nil
	}
	if !sc.series(t, func(g int32) int32 { return g }) {
		return nil, tooMany(rep)
	}
	rep.fill(&q, t, rankRows(sc.keys, t), nil)
	return rep, nil
}

func tooMany(rep *Report) error {
	return &QueryError{Problems: []string{fmt.Sprintf("grouped by %s over %d %s buckets, the report has more than %d group-buckets; ask for fewer dims, a wider bucket, a shorter range or a narrower node, or top=N",
		strings.Join(rep.GroupBy, ","), len(rep.Buckets), rep.Bucket, MaxAnswer)}}
}

// newReport is the heading of q's report for a caller scoped to scope: the
// range, its buckets, the grouping; and the subtree the report covers.
func newReport(q Query, scope string, now time.Time) (*Report, string, error) {
	node := q.Node
	switch {
	case scope != "" && node == "":
		node = scope
	case scope != "" && !runtime.InSubtree(scope, node):
		return nil, "", &ScopeError{Node: node, Scope: scope}
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
	return rep, node, nil
}

// sourceLocked fills the report's source and refuses what the rollup's
// daily cells cannot answer exactly.
func (r *Rollup) sourceLocked(rep *Report, q Query, scope string) error {
	rep.Source = Source{Rows: r.rows, Ledgers: 1}
	if scope != "" {
		// How much traffic the rest of the tree had is not the scope's
		// business.
		rep.Source.Rows = 0
	} else if !r.first.IsZero() {
		f, l := r.first.UTC(), r.last.UTC()
		rep.Source.First, rep.Source.Last = &f, &l
	}
	if hf := r.hourlyFromLocked(); !hf.IsZero() {
		rep.Source.HourlyFrom = &hf
		return checkDaily(q, hf)
	}
	return nil
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

// MaxAnswer bounds groups × buckets in one report.
const MaxAnswer = 4_000_000

// RowGroup is a group of a report as a row of its table: the group's key
// values (in group_by order), its total over the range, and, for the
// groups past top= summed into one, how many.
type RowGroup struct {
	Key    []string
	Total  acc
	Row    int
	Groups int
}

// rankGroups orders groups by rankBefore.
func rankGroups(keys [][]string, rk []rank) []int {
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(i, j int) bool {
		x, y := order[i], order[j]
		return rankBefore(&rk[x], &rk[y], keys[x], keys[y])
	})
	return order
}

// rankRows is every row of t as a group (row g being keys[g]), ranked.
func rankRows(keys [][]string, t *table) []RowGroup {
	tot := make([]acc, len(keys))
	rk := make([]rank, len(keys))
	for g := range keys {
		tot[g] = t.rowTotal(g)
		rk[g] = tot[g].rank()
	}
	order := rankGroups(keys, rk)
	out := make([]RowGroup, len(order))
	for i, g := range order {
		out[i] = RowGroup{Key: keys[g], Total: tot[g], Row: g}
	}
	return out
}

// fill writes the table into the report: the series and total of every
// row, and, grouped, the kept groups in order and the rest as one.
func (rep *Report) fill(q *Query, t *table, kept []RowGroup, other *RowGroup) {
	for b := range rep.Buckets {
		var s acc
		for row := 0; row < t.rows(); row++ {
			if a := t.get(row, b); a != nil {
				s.merge(a)
			}
		}
		if !s.empty() {
			rep.Total.Add(ptr(s.values()))
			rep.Series = append(rep.Series, Point{Start: rep.Buckets[b], Values: s.values()})
		}
	}
	if len(q.GroupBy) == 0 {
		return
	}
	series := func(row int) []Point {
		out := []Point{}
		if row >= t.rows() {
			return out
		}
		for b := range rep.Buckets {
			if a := t.get(row, b); a != nil {
				out = append(out, Point{Start: rep.Buckets[b], Values: a.values()})
			}
		}
		return out
	}
	rep.Groups = make([]Group, 0, len(kept)+1)
	for _, g := range kept {
		grp := Group{Key: map[string]string{}, Total: g.Total.values(), Series: series(g.Row)}
		for i, dim := range q.GroupBy {
			grp.Key[dim.String()] = g.Key[i]
		}
		rep.Groups = append(rep.Groups, grp)
	}
	if other != nil {
		rep.Groups = append(rep.Groups, Group{Key: map[string]string{}, Other: true, Groups: other.Groups,
			Total: other.Total.values(), Series: series(other.Row)})
	}
}

func ptr[T any](v T) *T { return &v }

// IsQueryError reports whether err is a query that cannot be answered.
func IsQueryError(err error) bool {
	var qe *QueryError
	return errors.As(err, &qe)
}
