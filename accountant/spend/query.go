package spend

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// Bucket is the width of a report's time buckets. Every bucket is UTC: a
// day from midnight, an ISO week from Monday midnight, a calendar month,
// as the limits count.
type Bucket uint8

const (
	Hour Bucket = iota + 1
	Day
	Week
	Month
)

var bucketNames = [...]string{Hour: "hour", Day: "day", Week: "week", Month: "month"}

func (b Bucket) String() string {
	if int(b) < len(bucketNames) && bucketNames[b] != "" {
		return bucketNames[b]
	}
	return "unknown"
}

// start returns the start of the bucket holding t.
func (b Bucket) start(t time.Time) time.Time {
	switch b {
	case Hour:
		return t.UTC().Truncate(time.Hour)
	case Day:
		return calendar.Start(calendar.Day, t)
	case Week:
		return calendar.Start(calendar.Week, t)
	}
	return calendar.Start(calendar.Month, t)
}

// next returns the start of the bucket after the one starting at s.
func (b Bucket) next(s time.Time) time.Time {
	switch b {
	case Hour:
		return s.Add(time.Hour)
	case Day:
		return s.AddDate(0, 0, 1)
	case Week:
		return s.AddDate(0, 0, 7)
	}
	return s.AddDate(0, 1, 0)
}

// Dim is an attribute a report groups by.
type Dim uint8

const (
	DimOrg Dim = iota + 1
	DimTeam
	DimUser
	DimNode
	DimKey
	DimModel
	DimServed
	DimProvider
	DimEndpoint
	DimLimit
	DimRefusal
	DimDecision
	DimCost
	// DimCustomer is the request's customer; DimTag its tags as sent
	// (sorted, joined by ","): grouped, the tag sets add up to the total;
	// filtered (tag=batch), every row carrying the tag is kept.
	DimCustomer
	DimTag
	lastDim = DimTag
)

var dimNames = [...]string{
	DimOrg: "org", DimTeam: "team", DimUser: "user", DimNode: "node", DimKey: "key",
	DimModel: "model", DimServed: "model_served", DimProvider: "provider", DimEndpoint: "endpoint",
	DimLimit: "limit", DimRefusal: "refusal", DimDecision: "decision", DimCost: "cost",
	DimCustomer: "customer", DimTag: "tag",
}

func (d Dim) String() string {
	if int(d) < len(dimNames) && dimNames[d] != "" {
		return dimNames[d]
	}
	return "unknown"
}

// dimList is the names of every Dim, for messages.
func dimList() string {
	var s []string
	for _, n := range dimNames {
		if n != "" {
			s = append(s, n)
		}
	}
	return strings.Join(s, ", ")
}

// filterList is the names of the dims a report filters by, for messages.
func filterList() string {
	var s []string
	for d := DimKey; d <= lastDim; d++ {
		s = append(s, d.String())
	}
	return strings.Join(s, ", ")
}

// costNames are the values of the cost dim.
var costNames = [...]string{NoCost: "none", Priced: "priced", Estimated: "estimated", Unpriced: "unpriced"}

func (c CostClass) String() string {
	if int(c) < len(costNames) {
		return costNames[c]
	}
	return "unknown"
}

// value is d's value for a row with dims x: the owner node cut to the
// dim's depth for org, team and user (a row owned higher up keeps its own
// node, so the groups of a subtree add up to it).
func (d Dim) value(x *Dims) string {
	switch d {
	case DimOrg:
		return nodePrefix(x.Node, 1)
	case DimTeam:
		return nodePrefix(x.Node, 2)
	case DimUser:
		return nodePrefix(x.Node, 3)
	case DimNode:
		return x.Node
	case DimKey:
		return x.KID
	case DimModel:
		return x.Model
	case DimServed:
		return x.Served
	case DimProvider:
		return x.Provider
	case DimEndpoint:
		return x.Endpoint
	case DimLimit:
		return x.Limit
	case DimRefusal:
		return x.ErrorType
	case DimDecision:
		return string(x.Decision)
	case DimCost:
		return x.Cost.String()
	case DimCustomer:
		return x.Customer
	case DimTag:
		return x.Tags
	}
	return ""
}

// matches reports whether a row of dims x has the value w of d: the tag
// dim holds a list, any of whose tags matches.
func (d Dim) matches(x *Dims, w string) bool {
	v := d.value(x)
	if d != DimTag {
		return v == w
	}
	for v != "" {
		var t string
		t, v, _ = strings.Cut(v, ",")
		if t == w {
			return true
		}
	}
	return false
}

// nodePrefix is node cut to its first n segments.
func nodePrefix(node string, n int) string {
	i := 0
	for k := 0; k < n; k++ {
		j := strings.IndexByte(node[i:], '/')
		if j < 0 {
			return node
		}
		i += j + 1
	}
	return node[:i-1]
}

// Query is what a report covers and how it is cut.
type Query struct {
	// From and To bound the rows' end times: From ≤ end < To. Both lie
	// on the hour.
	From, To time.Time
	Bucket   Bucket
	GroupBy  []Dim
	// Node keeps the rows owned by this node or any node below it; "" is
	// every row.
	Node string
	// Filters keep the rows whose dim has one of the values listed.
	Filters map[Dim][]string
	// Top, when positive, keeps the Top groups that spent most (priced and
	// estimated dollars, then UNPRICED tokens, then requests) and sums the
	// rest into one group marked Other.
	Top int
	// Local keeps the report to this accountant's own ledger (fleet=false);
	// otherwise an accountant of a fleet reports over every replica's.
	Local bool
}

// Limits on a query, so one request cannot ask for an answer of
// unbounded size.
const (
	// MaxBuckets bounds the buckets of one report.
	MaxBuckets = 10_000
	// MaxTop bounds top=.
	MaxTop = 10_000
)

// ParseQuery reads a report's query parameters:
//
//	group_by  comma-separated dims: org, team, user, node, key, model,
//	          model_served, provider, endpoint, limit, refusal, decision, cost
//	bucket    hour, day (default), week or month
//	from, to  RFC 3339 times on the hour, or dates (2026-08-01, midnight
//	          UTC); to is exclusive. Default: the current month so far
//	          (from its first day to the end of the current hour)
//	node      the subtree to report on (default: everything the caller sees)
//	key, model, model_served, provider, endpoint, limit, refusal,
//	decision, cost
//	          keep rows with one of the comma-separated values
//	top       keep the N groups that spent most, the rest summed as other
//	fleet     true (default): every replica of the fleet; false: this
//	          accountant's ledger only
//
// now is the instant the defaults are taken from. Every problem is
// reported in the error, naming the parameter and what it takes.
func ParseQuery(v url.Values, now time.Time) (Query, error) {
	var q Query
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	names := make([]string, 0, len(v))
	for name := range v {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if n := len(v[name]); n > 1 {
			bad("%s is given %d times; give it once (a list is comma-separated: %s=a,b)", name, n, name)
		}
	}
	known := map[string]bool{"group_by": true, "bucket": true, "from": true, "to": true, "node": true, "top": true, "format": true, "fleet": true}
	q.Bucket = Day
	if s := v.Get("bucket"); s != "" {
		q.Bucket = 0
		for b, n := range bucketNames {
			if n == s {
				q.Bucket = Bucket(b)
			}
		}
		if q.Bucket == 0 {
			bad("bucket %q is not one of hour, day, week, month", s)
		}
	}
	if s := v.Get("group_by"); s != "" {
		seen := map[Dim]bool{}
		for _, n := range strings.Split(s, ",") {
			d, ok := parseDim(strings.TrimSpace(n))
			switch {
			case !ok:
				bad("group_by %q is not one of %s", n, dimList())
			case seen[d]:
				bad("group_by names %s twice", d)
			default:
				seen[d] = true
				q.GroupBy = append(q.GroupBy, d)
			}
		}
	}
	for d := DimKey; d <= lastDim; d++ {
		name := d.String()
		known[name] = true
		s := v.Get(name)
		if s == "" {
			continue
		}
		if q.Filters == nil {
			q.Filters = map[Dim][]string{}
		}
		q.Filters[d] = strings.Split(s, ",")
	}
	for _, s := range q.Filters[DimDecision] {
		if !ledger.Decision(s).Known() {
			bad("decision %q is not one of admitted, refused, shadow_refused, soft_breach, passthrough", s)
		}
	}
	for _, s := range q.Filters[DimCost] {
		if _, ok := parseCost(s); !ok {
			bad("cost %q is not one of priced, estimated, unpriced, none", s)
		}
	}
	if s := v.Get("node"); s != "" {
		if err := govern.ValidNodeID(s); err != nil {
			bad("node: %v", err)
		}
		q.Node = s
	}
	if s := v.Get("top"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxTop {
			bad("top %q is not a whole number from 1 to %d", s, MaxTop)
		}
		q.Top = n
	}
	switch s := v.Get("fleet"); s {
	case "", "true":
	case "false":
		q.Local = true
	default:
		bad("fleet %q is not true (every replica's ledger) or false (this accountant's only)", s)
	}
	q.To = now.UTC().Truncate(time.Hour).Add(time.Hour)
	q.From = calendar.Start(calendar.Month, now)
	if s := v.Get("from"); s != "" {
		t, err := parseInstant(s)
		if err != nil {
			bad("from: %v", err)
		}
		q.From = t
	}
	if s := v.Get("to"); s != "" {
		t, err := parseInstant(s)
		if err != nil {
			bad("to: %v", err)
		}
		q.To = t
	}
	var unknown []string
	for name := range v {
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		bad("unknown parameter %q; a report takes group_by, bucket, from, to, node, top, fleet, format and the filters %s", name, filterList())
	}
	if len(probs) == 0 {
		if !q.From.Before(q.To) {
			bad("from %s is not before to %s", q.From.Format(time.RFC3339), q.To.Format(time.RFC3339))
		} else if q.buckets() > MaxBuckets {
			bad("%s to %s by %s is more than %d buckets; ask for a shorter range or a wider bucket", q.From.Format(time.RFC3339), q.To.Format(time.RFC3339), q.Bucket, MaxBuckets)
		}
	}
	if len(probs) > 0 {
		return q, &QueryError{Problems: probs}
	}
	return q, nil
}

// QueryError is a query that cannot be answered; each problem names the
// parameter and what it takes.
type QueryError struct {
	Problems []string
}

func (e *QueryError) Error() string { return strings.Join(e.Problems, "; ") }

func parseDim(s string) (Dim, bool) {
	for d, n := range dimNames {
		if n != "" && n == s {
			return Dim(d), true
		}
	}
	return 0, false
}

func parseCost(s string) (CostClass, bool) {
	for c, n := range costNames {
		if n == s {
			return CostClass(c), true
		}
	}
	return 0, false
}

// parseInstant reads an RFC 3339 time on the hour, or a date (midnight
// UTC).
func parseInstant(s string) (time.Time, error) {
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time (2026-08-01T00:00:00Z) or a date (2026-08-01)", s)
	}
	t = t.UTC()
	if !t.Truncate(time.Hour).Equal(t) {
		return time.Time{}, fmt.Errorf("%s is not on the hour; spend is summed by the hour, so a report starts and ends on one (%s)", s, t.Truncate(time.Hour).Format(time.RFC3339))
	}
	return t, nil
}

// buckets counts the buckets of the query's range.
func (q *Query) buckets() int {
	n := 0
	for s := q.Bucket.start(q.From); s.Before(q.To) && n <= MaxBuckets; s = q.Bucket.next(s) {
		n++
	}
	return n
}

// Values renders the query as URL parameters (what ParseQuery reads).
func (q Query) Values() url.Values {
	v := url.Values{}
	v.Set("from", q.From.UTC().Format(time.RFC3339))
	v.Set("to", q.To.UTC().Format(time.RFC3339))
	if q.Bucket != 0 {
		v.Set("bucket", q.Bucket.String())
	}
	if len(q.GroupBy) > 0 {
		var s []string
		for _, d := range q.GroupBy {
			s = append(s, d.String())
		}
		v.Set("group_by", strings.Join(s, ","))
	}
	if q.Node != "" {
		v.Set("node", q.Node)
	}
	for d, vals := range q.Filters {
		v.Set(d.String(), strings.Join(vals, ","))
	}
	if q.Top > 0 {
		v.Set("top", strconv.Itoa(q.Top))
	}
	if q.Local {
		v.Set("fleet", "false")
	}
	return v
}
