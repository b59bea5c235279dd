package spend

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// afterRows is a clock past every row randomRows makes from t0 and every
// range randomQuery asks about: a fleet report refuses shares with rows
// in its future.
func afterRows(t0 time.Time) time.Time { return t0.AddDate(0, 4, 0) }

// jsonPeer asks a rollup for its share through the JSON form the
// accountants exchange.
func jsonPeer(name string, r *Rollup) Peer {
	return Peer{Accountant: name, Ask: func(_ context.Context, req PartialRequest) (*Partial, error) {
		b, err := json.Marshal(req)
		if err != nil {
			return nil, err
		}
		var back PartialRequest
		if err := json.Unmarshal(b, &back); err != nil {
			return nil, err
		}
		p, err := r.Partial(back)
		if err != nil {
			return nil, err
		}
		if b, err = json.Marshal(p); err != nil {
			return nil, err
		}
		var out Partial
		return &out, json.Unmarshal(b, &out)
	}}
}

// TestFleetRunAddsUpExactly: rows spread over three rollups (three
// ledgers) report, added up through their shares, exactly what one
// rollup of every row reports: every grouping, bucket, filter, scope and
// top=.
func TestFleetRunAddsUpExactly(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	t0 := time.Date(2026, 1, 20, 0, 0, 0, 0, time.UTC)
	rows := randomRows(rng, 6000, t0)
	for i := range rows {
		rows[i].Replica = []string{"gw-a", "gw-b", "gw-c"}[i%3]
	}
	all := New(Options{HourlyDays: -1})
	all.Add(rows)
	shares := []*Rollup{New(Options{HourlyDays: -1}), New(Options{HourlyDays: -1}), New(Options{HourlyDays: -1})}
	for i := range rows {
		shares[i%3].Add(rows[i : i+1])
	}
	peers := []Peer{jsonPeer("http://a", shares[0]), jsonPeer("http://b", shares[1]), jsonPeer("http://c", shares[2])}
	peers[0].Self = true
	for step := 0; step < 120; step++ {
		v := randomQuery(rng, t0)
		if rng.Intn(2) == 0 {
			v.Set("top", []string{"1", "3", "10", "1000"}[rng.Intn(4)])
		}
		q, err := ParseQuery(v, t0)
		if err != nil {
			t.Fatal(err)
		}
		scope := []string{"", "", "org:a", "org:a/team:x/user:u1"}[rng.Intn(4)]
		if q.Node != "" && scope != "" {
			scope = ""
		}
		want, err := all.Run(q, scope, t0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := FleetRun(context.Background(), q, scope, afterRows(t0), peers, Plausibility{})
		if err != nil {
			t.Fatalf("step %d: %s: %v", step, v.Encode(), err)
		}
		if !reflect.DeepEqual(got.Groups, want.Groups) || got.Total != want.Total || !reflect.DeepEqual(got.Series, want.Series) {
			t.Fatalf("step %d: %s scope %q: the fleet's report differs from one rollup's:\n%+v\n%+v", step, v.Encode(), scope, got.Groups, want.Groups)
		}
		if !got.Fleet || got.Partial || got.Source.Ledgers != 3 || got.Source.Missing != 0 || len(got.Source.Replicas) != 3 || len(got.Source.Overlaps) != 0 {
			t.Fatalf("step %d: source %+v; want three ledgers answered", step, got.Source)
		}
		if scope == "" && got.Source.Rows != int64(len(rows)) {
			t.Fatalf("step %d: source rows %d; want %d", step, got.Source.Rows, len(rows))
		}
	}
}

// TestFleetRunSaysWhoDidNotAnswer: an accountant that does not answer is
// left out, named, and the report is partial; one whose rows overlap
// another's is named as an overlap; a query a share cannot answer fails
// the report naming the accountant.
func TestFleetRunSaysWhoDidNotAnswer(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	t0 := time.Date(2026, 1, 20, 0, 0, 0, 0, time.UTC)
	rows := randomRows(rng, 3000, t0)
	for i := range rows {
		rows[i].Replica = "gw-a"
	}
	a, b := New(Options{HourlyDays: -1}), New(Options{HourlyDays: -1})
	a.Add(rows[:2000])
	b.Add(rows[1500:])
	seen := t0.Add(-time.Minute)
	down := Peer{Accountant: "http://down", LastSeen: seen, Ask: func(context.Context, PartialRequest) (*Partial, error) {
		return nil, errors.New("connection refused")
	}}
	for _, top := range []string{"", "5"} {
		v := randomQuery(rng, t0)
		v.Set("group_by", "key")
		v.Set("top", top)
		if top == "" {
			v.Del("top")
		}
		q, err := ParseQuery(v, t0)
		if err != nil {
			t.Fatal(err)
		}
		only := New(Options{HourlyDays: -1})
		only.Add(rows[:2000])
		want, _ := only.Run(q, "", t0)
		got, err := FleetRun(context.Background(), q, "", afterRows(t0), []Peer{jsonPeer("http://a", a), down}, Plausibility{})
		if err != nil {
			t.Fatal(err)
		}
		if !got.Partial || got.Source.Missing != 1 || got.Source.Ledgers != 1 {
			t.Fatalf("top=%q: partial %v, source %+v; want partial, one missing", top, got.Partial, got.Source)
		}
		r := got.Source.Replicas[1]
		if r.Accountant != "http://down" || r.Answered || r.Error != "connection refused" || r.LastSeen == nil || !r.LastSeen.Equal(seen) {
			t.Fatalf("top=%q: the missing accountant reads %+v", top, r)
		}
		if got.Total != want.Total || !reflect.DeepEqual(got.Groups, want.Groups) {
			t.Fatalf("top=%q: the partial report is not the answering ledger's", top)
		}
	}
	q, _ := ParseQuery(map[string][]string{"from": {"2026-01-20"}, "to": {"2026-02-20"}}, t0)
	got, err := FleetRun(context.Background(), q, "", afterRows(t0), []Peer{jsonPeer("http://a", a), jsonPeer("http://b", b)}, Plausibility{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Source.Overlaps) != 1 || got.Source.Overlaps[0].Replica != "gw-a" || !reflect.DeepEqual(got.Source.Overlaps[0].Accountants, []string{"http://a", "http://b"}) {
		t.Fatalf("overlaps %+v; want gw-a in both", got.Source.Overlaps)
	}
	// One accountant reached under two addresses answers with one
	// instance id: counted once, listed once.
	same := func(name string) Peer {
		p := jsonPeer(name, a)
		ask := p.Ask
		p.Ask = func(ctx context.Context, req PartialRequest) (*Partial, error) {
			part, err := ask(ctx, req)
			if part != nil {
				part.Instance = "the-one"
			}
			return part, err
		}
		return p
	}
	got, err = FleetRun(context.Background(), q, "", afterRows(t0), []Peer{same("http://a"), same("http://a-again")}, Plausibility{})
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := a.Run(q, "", t0); got.Total != want.Total || len(got.Source.Replicas) != 1 || got.Partial {
		t.Fatalf("one accountant under two addresses: total %+v (want %+v), %d listed, partial %v", got.Total, want.Total, len(got.Source.Replicas), got.Partial)
	}
	compacted := New(Options{HourlyDays: 1})
	compacted.Add(rows)
	compacted.Compact(t0.AddDate(0, 3, 0))
	q, _ = ParseQuery(map[string][]string{"from": {"2026-01-20T05:00:00Z"}, "to": {"2026-02-20"}, "bucket": {"hour"}}, t0)
	_, err = FleetRun(context.Background(), q, "", afterRows(t0), []Peer{jsonPeer("http://a", a), jsonPeer("http://old", compacted)}, Plausibility{})
	if !IsQueryError(err) || !containsAll(err.Error(), "http://old: ", "daily sums") {
		t.Fatalf("a share past its hourly window: %v; want a query error naming it", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

// TestFleetRunLeavesOutImplausibleShares: a share holding what its
// accountant cannot have recorded (dollars past its tokens at the dearest
// rate, rows in a bucket that has not begun or outside its own ledger's
// span, a node outside the tree or the caller's scope) is left out and
// named, and the report is the honest shares'. A share counting more
// requests than its ledger has rows is honest: a summary row stands for
// many.
func TestFleetRunLeavesOutImplausibleShares(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	t0 := time.Date(2026, 1, 20, 0, 0, 0, 0, time.UTC)
	now := afterRows(t0)
	rows := randomRows(rng, 500, t0)
	self := New(Options{HourlyDays: -1})
	self.Add(rows)
	v := map[string][]string{"from": {"2026-01-01"}, "to": {"2026-06-01"}, "bucket": {"month"}, "group_by": {"node"}}
	q, err := ParseQuery(v, now)
	if err != nil {
		t.Fatal(err)
	}
	want, err := self.Run(q, "", now)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{"org:a": true, "org:a/team:x": true, "org:a/team:x/user:u1": true, "org:a/team:x/user:u2": true,
		"org:a/team:y": true, "org:a/team:y/user:u3": true, "org:b": true, "org:b/team:z": true, "org:b/team:z/user:u4": true}
	var refused []string
	pl := Plausibility{KnownNode: func(n string) bool { return known[n] }, MaxNanosPerToken: 600_000,
		OnRefused: func(a string, err error) { refused = append(refused, a) }}
	first, last := t0, t0.Add(24*time.Hour)
	cell := func(bucket, requests, input, nanos int64) []int64 {
		c := make([]int64, 1+fNone)
		c[0] = bucket
		c[1+fRequests], c[1+fAdmitted], c[1+fInput], c[1+fPricedNanos], c[1+fPricedReq] = requests, requests, input, nanos, requests
		return c
	}
	forged := func(name string, keys [][]string, table [][][]int64, rows int64) Peer {
		return Peer{Accountant: name, Ask: func(context.Context, PartialRequest) (*Partial, error) {
			return &Partial{Instance: name, Rows: rows, First: &first, Last: &last, Keys: keys, Table: table}, nil
		}}
	}
	// Buckets: 2026-01, 02, 03, 04, 05; now is in May.
	for i, c := range []struct {
		peer Peer
		why  string
	}{
		{forged("http://dollars", [][]string{{"org:a"}}, [][][]int64{{cell(0, 1, 10, 5_000_000_000_000)}}, 1), "its answer holds $5000 for 10 tokens, more than any model of the catalog costs"},
		{forged("http://future", [][]string{{"org:a"}}, [][][]int64{{cell(4, 1, 10, 1)}}, 1), "its answer has rows in the bucket of 2026-05-01T00:00:00Z, after its last row (2026-01-21T00:00:00Z)"},
		{forged("http://node", [][]string{{"org:evil"}}, [][][]int64{{cell(0, 1, 10, 1)}}, 1), `its answer holds rows of node "org:evil", which is no node of the fleet's tenancy tree`},
	} {
		refused = nil
		self := Peer{Accountant: "http://self", Self: true, Ask: jsonPeer("http://self", self).Ask}
		got, err := FleetRun(context.Background(), q, "", now, []Peer{self, c.peer}, pl)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		r := got.Source.Replicas[1]
		if r.Answered || r.Error != "its share was left out: "+c.why || len(refused) != 1 {
			t.Errorf("case %d: %+v (refused %v)\nwant the reason %q", i, r, refused, c.why)
		}
		if got.Total != want.Total || !reflect.DeepEqual(got.Groups, want.Groups) {
			t.Errorf("case %d: the forged share was added", i)
		}
	}
}

// TestFleetRunAddsSummaryRows: an honest share whose ledger holds summary
// rows (each standing for many requests) counts more requests than it
// has rows, and is added, not left out.
func TestFleetRunAddsSummaryRows(t *testing.T) {
	t0 := time.Date(2026, 1, 20, 0, 0, 0, 0, time.UTC)
	now := afterRows(t0)
	peer := New(Options{HourlyDays: -1})
	peer.Add([]ledger.Row{{RequestID: "tt_summary", Kind: ledger.KindSummary, Count: 40, Start: t0, End: t0,
		Decision: ledger.Refused, ErrorType: "invalid_api_key"}})
	q, err := ParseQuery(map[string][]string{"from": {"2026-01-01"}, "to": {"2026-06-01"}, "bucket": {"month"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	self := Peer{Accountant: "http://self", Self: true, Ask: jsonPeer("http://self", New(Options{HourlyDays: -1})).Ask}
	var refused []string
	pl := Plausibility{MaxNanosPerToken: 600_000, OnRefused: func(a string, err error) { refused = append(refused, a+": "+err.Error()) }}
	rep, err := FleetRun(context.Background(), q, "", now, []Peer{self, jsonPeer("http://peer", peer)}, pl)
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) > 0 || !rep.Source.Replicas[1].Answered || rep.Total.Requests != 40 {
		t.Fatalf("a share of one summary row of 40 refusals: refused %v, answered %v, %d requests in the report; want it added, 40 requests",
			refused, rep.Source.Replicas[1].Answered, rep.Total.Requests)
	}
}
