package spend

import (
	"strconv"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// TestRollupBoundsCallerValues: a day of rows naming more distinct models
// (or customers) than a day keeps cells for sums the rest under "*": the
// groups stay bounded, the totals whole.
func TestRollupBoundsCallerValues(t *testing.T) {
	r := New(Options{})
	day := time.Date(2026, 8, 10, 0, 0, 0, 0, time.UTC)
	const n = maxModelsPerDay + 2_000
	rows := make([]ledger.Row, n)
	for i := range rows {
		rows[i] = ledger.Row{RequestID: "tt_x", End: day.Add(time.Duration(i) * time.Second), Node: "org:acme",
			Model: "made-up-" + strconv.Itoa(i), Customer: "c" + strconv.Itoa(i%3), Status: 200, Decision: ledger.Admitted,
			Usage: ledger.Usage{Input: 1}}
	}
	r.Add(rows)
	q := Query{From: day, To: day.Add(24 * time.Hour), Bucket: Day, GroupBy: []Dim{DimModel}}
	rep, err := r.Run(q, "", day.Add(25*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Groups) != maxModelsPerDay+1 {
		t.Errorf("%d groups, want %d (the bound and *)", len(rep.Groups), maxModelsPerDay+1)
	}
	var total, star int64
	for _, g := range rep.Groups {
		total += g.Total.Requests
		if g.Key["model"] == "*" {
			star = g.Total.Requests
		}
	}
	if total != n || star != 2_000 {
		t.Errorf("%d requests in all, %d under *; want %d and 2000", total, star, n)
	}
	q.GroupBy = []Dim{DimCustomer}
	if rep, err = r.Run(q, "", day.Add(25*time.Hour)); err != nil || len(rep.Groups) != 3 {
		t.Errorf("by customer: %v groups, %v", len(rep.Groups), err)
	}
}
