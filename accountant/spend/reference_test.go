package spend

import (
	"fmt"
	"math/rand"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/sat"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// randomRows draws n rows over about 70 days from a small universe, so
// cells and groups collide often.
func randomRows(rng *rand.Rand, n int, t0 time.Time) []ledger.Row {
	nodes := []string{"", "org:a", "org:a/team:x", "org:a/team:x/user:u1", "org:a/team:x/user:u2", "org:a/team:y/user:u3", "org:b/team:z/user:u4"}
	models := []string{"m1", "m2", "m3"}
	decisions := []ledger.Decision{ledger.Admitted, ledger.Admitted, ledger.Admitted, ledger.Refused, ledger.ShadowRefused, ledger.SoftBreach}
	rows := make([]ledger.Row, n)
	for i := range rows {
		var id [16]byte
		rng.Read(id[:])
		r := ledger.Row{
			RequestID: wire.NewRequestID(id),
			End:       t0.Add(time.Duration(rng.Int63n(int64(70 * 24 * time.Hour)))),
			Node:      nodes[rng.Intn(len(nodes))],
			Model:     models[rng.Intn(len(models))],
			Served:    models[rng.Intn(len(models))] + "-served",
			Provider:  []string{"openai", "anthropic"}[rng.Intn(2)],
			Endpoint:  []string{"/v1/chat/completions", "/v1/messages"}[rng.Intn(2)],
			Decision:  decisions[rng.Intn(len(decisions))],
			Usage:     ledger.Usage{Input: rng.Int63n(1000), Output: rng.Int63n(100), CachedInput: rng.Int63n(10), Reasoning: rng.Int63n(10)},
		}
		r.Start = r.End
		if r.Node != "" {
			r.KID = "vk_" + string(rune('a'+rng.Intn(4)))
		}
		if r.Decision == ledger.Refused {
			r.Usage = ledger.Usage{}
			r.ErrorType = []string{"rate_limited", "budget_exceeded"}[rng.Intn(2)]
			r.RefusedBy = &ledger.Ref{LimitID: []string{"l1", "l2"}[rng.Intn(2)], LimitType: "rpm", Node: r.Node}
		} else {
			r.Cost = &ledger.Cost{Nanos: rng.Int63n(100000)}
			switch rng.Intn(5) {
			case 0:
				r.Cost = &ledger.Cost{Unpriced: true}
			case 1:
				r.Cost.Estimated = true
			}
		}
		rows[i] = r
	}
	return rows
}

// reference computes a report the obvious way: row by row.
func reference(rows []ledger.Row, q Query, scope string) map[string]Values {
	node := q.Node
	if node == "" {
		node = scope
	}
	out := map[string]Values{}
	for i := range rows {
		r := &rows[i]
		if r.End.Before(q.From) || !r.End.Before(q.To) {
			continue
		}
		if node != "" && !runtime.InSubtree(node, r.Node) {
			continue
		}
		d := dimsOf(r)
		keep := true
		for dim, vals := range q.Filters {
			found := false
			for _, v := range vals {
				found = found || dim.value(&d) == v
			}
			keep = keep && found
		}
		if !keep {
			continue
		}
		key := []string{q.Bucket.start(r.End).Format(time.RFC3339)}
		for _, dim := range q.GroupBy {
			key = append(key, dim.value(&d))
		}
		k := strings.Join(key, "|")
		v := out[k]
		s := sumsOf(r)
		v.addCell(refKind{decision: r.Decision, cost: d.Cost}, &s)
		out[k] = v
	}
	return out
}

func flatten(rep *Report) map[string]Values {
	out := map[string]Values{}
	if len(rep.GroupBy) == 0 {
		for _, p := range rep.Series {
			out[p.Start.Format(time.RFC3339)] = p.Values
		}
		return out
	}
	for _, g := range rep.Groups {
		for _, p := range g.Series {
			out[p.Start.Format(time.RFC3339)+"|"+strings.Join(GroupKey(rep, &g), "|")] = p.Values
		}
	}
	return out
}

func randomQuery(rng *rand.Rand, t0 time.Time) url.Values {
	v := url.Values{}
	from := t0.Add(time.Duration(rng.Intn(60*24)) * time.Hour)
	to := from.Add(time.Duration(1+rng.Intn(40*24)) * time.Hour)
	v.Set("from", from.Format(time.RFC3339))
	v.Set("to", to.Format(time.RFC3339))
	v.Set("bucket", []string{"hour", "day", "week", "month"}[rng.Intn(4)])
	var gb []string
	for _, d := range []string{"org", "team", "user", "node", "key", "model", "model_served", "provider", "endpoint", "limit", "refusal", "decision", "cost"} {
		if rng.Intn(6) == 0 {
			gb = append(gb, d)
		}
	}
	if len(gb) > 0 {
		v.Set("group_by", strings.Join(gb, ","))
	}
	switch rng.Intn(4) {
	case 0:
		v.Set("model", "m1,m3")
	case 1:
		v.Set("decision", "refused")
	case 2:
		v.Set("node", "org:a/team:x")
	}
	return v
}

// TestReportMatchesReference checks reports over random rows, random
// queries and random scopes against the row-by-row reference, before and
// after the hourly cells are compacted into days.
func TestReportMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	t0 := time.Date(2026, 1, 20, 0, 0, 0, 0, time.UTC)
	rows := randomRows(rng, 5000, t0)
	r := New(Options{HourlyDays: -1})
	for i := 0; i < len(rows); i += 700 {
		r.Enqueue(rows[i:min(i+700, len(rows))], nil)
	}
	compacted := New(Options{HourlyDays: 10})
	compacted.Add(rows[:2500])
	compacted.Compact(t0.Add(40 * 24 * time.Hour))
	compacted.Add(rows[2500:]) // late rows land in compacted days too
	hf := compacted.HourlyFrom()
	if want := t0.Add(30 * 24 * time.Hour); !hf.Equal(want) {
		t.Fatalf("HourlyFrom = %s; want %s", hf, want)
	}
	for step := 0; step < 150; step++ {
		v := randomQuery(rng, t0)
		q, err := ParseQuery(v, t0)
		if err != nil {
			t.Fatalf("step %d: %s: %v", step, v.Encode(), err)
		}
		scope := []string{"", "", "org:a", "org:a/team:x/user:u1"}[rng.Intn(4)]
		if q.Node != "" && scope != "" && !runtime.InSubtree(scope, q.Node) {
			scope = ""
		}
		want := reference(rows, q, scope)
		for name, rr := range map[string]*Rollup{"hourly": r, "compacted": compacted} {
			rep, err := rr.Run(q, scope, t0)
			if name == "compacted" && (q.Bucket == Hour && q.From.Before(hf) ||
				q.From.Before(hf) && q.From.Hour() != 0 || q.To.Before(hf) && q.To.Hour() != 0) {
				if !IsQueryError(err) {
					t.Fatalf("step %d: %s over compacted days answered %v; want a query error", step, v.Encode(), err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("step %d: %s: %v", step, v.Encode(), err)
			}
			got := flatten(rep)
			if len(got) != len(want) {
				t.Fatalf("step %d (%s): %s scope %q: %d cells; want %d", step, name, v.Encode(), scope, len(got), len(want))
			}
			for k, w := range want {
				if got[k] != w {
					t.Fatalf("step %d (%s): %s scope %q: %s = %+v; want %+v", step, name, v.Encode(), scope, k, got[k], w)
				}
			}
		}
	}
}

// TestBuildCountsARowOnceAcrossLedgers: three ledgers, where the second
// repeats some rows of the first (a retried batch that reached another
// accountant) and the third names the first's file again; the report
// equals the one over the distinct rows.
func TestBuildCountsARowOnceAcrossLedgers(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	rows := randomRows(rng, 900, t0)
	dir := t.TempDir()
	write := func(name string, rs []ledger.Row) string {
		var b []byte
		for i := range rs {
			b = append(rs[i].AppendJSON(b), '\n')
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.jsonl", rows[:500])
	b := write("b.jsonl", append(append([]ledger.Row{}, rows[400:500]...), rows[500:800]...))
	c := write("c.jsonl", rows[800:])
	got, st, err := Build(BuildOptions{Ledgers: [][]string{{a}, {b}, {c, a}}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows != 900 || st.Duplicates != 100 || st.Files != 3 {
		t.Fatalf("stats %+v; want 900 rows, 100 duplicates, 3 files", st)
	}
	want := New(Options{})
	want.Add(rows)
	q, _ := ParseQuery(url.Values{"from": {"2026-03-01"}, "to": {"2026-06-01"}, "bucket": {"week"}, "group_by": {"node,model,cost"}}, t0)
	g, _ := got.Run(q, "", t0)
	w, _ := want.Run(q, "", t0)
	gf, wf := flatten(g), flatten(w)
	if len(gf) != len(wf) || g.Total != w.Total {
		t.Fatalf("merged report: %d cells, total %+v; want %d, %+v", len(gf), g.Total, len(wf), w.Total)
	}
	for k := range wf {
		if gf[k] != wf[k] {
			t.Fatalf("%s = %+v; want %+v", k, gf[k], wf[k])
		}
	}
}

// TestMergeIsExact: rollups built apart and merged report what one built
// from every row reports.
func TestMergeIsExact(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	rows := randomRows(rng, 2000, t0)
	all := New(Options{HourlyDays: -1})
	all.Add(rows)
	a, b := New(Options{HourlyDays: -1}), New(Options{HourlyDays: -1})
	a.Add(rows[:1200])
	b.Add(rows[1200:])
	a.Merge(b)
	q, _ := ParseQuery(url.Values{"from": {"2026-05-01"}, "to": {"2026-08-01"}, "bucket": {"day"}, "group_by": {"user,endpoint,decision"}}, t0)
	x, _ := a.Run(q, "", t0)
	y, _ := all.Run(q, "", t0)
	xf, yf := flatten(x), flatten(y)
	if len(xf) != len(yf) {
		t.Fatalf("%d cells; want %d", len(xf), len(yf))
	}
	for k := range yf {
		if xf[k] != yf[k] {
			t.Fatalf("%s = %+v; want %+v", k, xf[k], yf[k])
		}
	}
	if sa, sall := a.Stats(), all.Stats(); sa.Rows != sall.Rows || sa.Cells != sall.Cells {
		t.Fatalf("merged stats %+v; want %+v", sa, sall)
	}
}

// refKind is what decides where a cell's sums go in Values, for the
// reference: the report itself uses kind.
type refKind struct {
	decision ledger.Decision
	cost     CostClass
}

// addCell is the reference's sum: field by field, as Values documents.
func (v *Values) addCell(k refKind, s *Sums) {
	v.Requests = sat.Add(v.Requests, s.Requests)
	switch k.decision {
	case ledger.Admitted:
		v.Admitted = sat.Add(v.Admitted, s.Requests)
	case ledger.Refused:
		v.Refused = sat.Add(v.Refused, s.Requests)
	case ledger.ShadowRefused:
		v.ShadowRefused = sat.Add(v.ShadowRefused, s.Requests)
	case ledger.SoftBreach:
		v.SoftBreach = sat.Add(v.SoftBreach, s.Requests)
	}
	v.InputTokens = sat.Add(v.InputTokens, s.Input)
	v.OutputTokens = sat.Add(v.OutputTokens, s.Output)
	v.CachedInputTokens = sat.Add(v.CachedInputTokens, s.CachedInput)
	v.ReasoningTokens = sat.Add(v.ReasoningTokens, s.Reasoning)
	switch k.cost {
	case Priced:
		v.PricedUSD.Nanos = sat.Add(v.PricedUSD.Nanos, s.Nanos)
		v.PricedRequests = sat.Add(v.PricedRequests, s.Requests)
	case Estimated:
		v.EstimatedUSD.Nanos = sat.Add(v.EstimatedUSD.Nanos, s.Nanos)
		v.EstimatedRequests = sat.Add(v.EstimatedRequests, s.Requests)
	case Unpriced:
		v.UnpricedRequests = sat.Add(v.UnpricedRequests, s.Requests)
		v.UnpricedTokens = sat.Add(v.UnpricedTokens, sat.Add(s.Input, s.Output))
	}
}

// TestTopKeepsTheBiggestAndSumsTheRest: a top= report (two passes: rank,
// then series of the kept groups and of the rest) equals the full report
// (checked against the rows above) cut after its first N groups, the rest
// summed bucket by bucket into one.
func TestTopKeepsTheBiggestAndSumsTheRest(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	t0 := time.Date(2026, 1, 20, 0, 0, 0, 0, time.UTC)
	rows := randomRows(rng, 5000, t0)
	r := New(Options{HourlyDays: -1})
	r.Add(rows)
	for step := 0; step < 100; step++ {
		v := randomQuery(rng, t0)
		if v.Get("group_by") == "" {
			v.Set("group_by", "key")
		}
		q, err := ParseQuery(v, t0)
		if err != nil {
			t.Fatal(err)
		}
		full, err := r.Run(q, "", t0)
		if err != nil {
			t.Fatal(err)
		}
		q.Top = 1 + rng.Intn(len(full.Groups)+2)
		top, err := r.Run(q, "", t0)
		if err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("step %d: %s top=%d", step, v.Encode(), q.Top)
		if top.Total != full.Total || !reflect.DeepEqual(top.Series, full.Series) {
			t.Fatalf("%s: total or series differ from the full report's", what)
		}
		k := min(q.Top, len(full.Groups))
		if !reflect.DeepEqual(top.Groups[:k], full.Groups[:k]) {
			t.Fatalf("%s: the kept groups differ from the full report's first %d:\n%+v\n%+v", what, k, top.Groups[:k], full.Groups[:k])
		}
		if k == len(full.Groups) {
			if len(top.Groups) != k {
				t.Fatalf("%s: %d groups; want %d and no other", what, len(top.Groups), k)
			}
			continue
		}
		if len(top.Groups) != k+1 || !top.Groups[k].Other || top.Groups[k].Groups != len(full.Groups)-k {
			t.Fatalf("%s: want %d groups then the other summing %d", what, k, len(full.Groups)-k)
		}
		var tot Values
		byBucket := map[time.Time]Values{}
		for _, g := range full.Groups[k:] {
			tot.Add(&g.Total)
			for _, p := range g.Series {
				x := byBucket[p.Start]
				x.Add(&p.Values)
				byBucket[p.Start] = x
			}
		}
		other := top.Groups[k]
		if other.Total != tot || len(other.Series) != len(byBucket) {
			t.Fatalf("%s: other total %+v over %d buckets; want %+v over %d", what, other.Total, len(other.Series), tot, len(byBucket))
		}
		for _, p := range other.Series {
			if byBucket[p.Start] != p.Values {
				t.Fatalf("%s: other at %s = %+v; want %+v", what, p.Start, p.Values, byBucket[p.Start])
			}
		}
	}
}

// TestBuildReadsEveryRowKind: over two ledgers, a summary counts as its
// requests, a start as nothing, and a late end replaces the estimate its
// close counted; the end's copy in the other ledger (a retried batch that
// reached another accountant) is counted once, and the call's start and
// close are not taken for copies of its end.
func TestBuildReadsEveryRowKind(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	base := ledger.Row{Start: t0, End: t0, Node: "org:acme", Model: "gpt-4o-mini", Provider: "openai", Endpoint: "/v1/chat/completions",
		Status: 200, Decision: ledger.Admitted, Cost: &ledger.Cost{Nanos: 1000}}
	summary := base
	summary.RequestID, summary.Kind, summary.Count, summary.Usage = "tt_aaaaaaaaaaaaaaaaaaaaaaaaaa", ledger.KindSummary, 40, ledger.Usage{Input: 400}
	start := base
	start.RequestID, start.Kind, start.Usage, start.Cost = "tt_e6gbpncee32dbu7y5jpsfr4ax4", ledger.KindStart, ledger.Usage{Input: 5, Output: 500}, nil
	closed := start
	closed.Kind, closed.End, closed.Cost = ledger.KindClose, t0.Add(time.Hour), &ledger.Cost{Nanos: 90000, Estimated: true}
	late := base
	late.RequestID, late.End, late.Usage = start.RequestID, t0.Add(2*time.Hour), ledger.Usage{Input: 5, Output: 7}
	late.Replaced = &ledger.Replaced{End: closed.End, Usage: closed.Usage, Cost: closed.Cost}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	os.WriteFile(a, ledger.AppendJSONL(nil, []ledger.Row{summary, start, closed, late}), 0o644)
	os.WriteFile(b, ledger.AppendJSONL(nil, []ledger.Row{late}), 0o644)
	got, st, err := Build(BuildOptions{Ledgers: [][]string{{a}, {b}}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Duplicates != 1 {
		t.Errorf("stats %+v; want the end's copy as the one duplicate", st)
	}
	q, _ := ParseQuery(url.Values{"from": {"2026-03-01"}, "to": {"2026-04-01"}, "bucket": {"month"}}, t0)
	rep, _ := got.Run(q, "", t0)
	if v := rep.Total; v.Requests != 41 || v.InputTokens != 405 || v.OutputTokens != 7 || v.EstimatedRequests != 0 {
		t.Errorf("total %+v; want 41 requests, 405/7 tokens, none estimated", v)
	}
}
