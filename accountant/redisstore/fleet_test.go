package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/store"
	"github.com/tokentriage/tokentriage/internal/redistest"
	"github.com/tokentriage/tokentriage/shared/calendar"
)

func fleetValue(t *testing.T, f *Fleet, now time.Time, k store.Key) int64 {
	t.Helper()
	cs, err := f.Current(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Key == k {
			return c.Value
		}
	}
	return 0
}

// TestFleetTotalsSumOwnTotals: each accountant publishes its own total by
// setting it; every accountant reads the others' back. A republish, a
// replay (Replace with the same counters) or a retried publish counts
// nothing twice, and after Redis loses its data the totals come back from
// the accountants' own counters.
func TestFleetTotalsSumOwnTotals(t *testing.T) {
	r := redistest.Start(t)
	ctx := context.Background()
	now := testNoon()
	clock := func() time.Time { return now }
	ca, cb := testClient(t, r), testClient(t, r)
	a := NewFleet(ca, "acct-a", clock, nil)
	b := NewFleet(cb, "acct-b", clock, nil)
	day := store.Key{ID: "org_day|budget_usd|org:acme||day|", Unit: calendar.Day, Start: calendar.Start(calendar.Day, now).Unix()}

	step := func(what string) {
		t.Helper()
		for _, f := range []*Fleet{a, b} {
			f.Refresh(ctx)
			if err := f.Publish(ctx); err != nil {
				t.Fatalf("%s: publish: %v", what, err)
			}
		}
		for _, f := range []*Fleet{a, b} {
			f.Refresh(ctx)
		}
	}
	if _, err := a.Add(ctx, []store.Delta{{Key: day, N: 700}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Add(ctx, []store.Delta{{Key: day, N: 50}}, nil); err != nil {
		t.Fatal(err)
	}
	step("first publish")
	if va, vb := fleetValue(t, a, now, day), fleetValue(t, b, now, day); va != 750 || vb != 750 {
		t.Fatalf("fleet total on a %d, on b %d; want 750 on both", va, vb)
	}
	// Add returns the fleet's value as the accountant knows it (for its
	// threshold alerts).
	if got, _ := b.Add(ctx, []store.Delta{{Key: day, N: 10}}, nil); got[0] != 760 {
		t.Fatalf("b.Add returned %v, want the fleet's 760", got)
	}
	// The same totals again (a replay at restart is a Replace with what the
	// ledger holds), and a publish sent twice: nothing doubles.
	a.Replace(ctx, []store.Counter{{Key: day, Value: 700}})
	step("republish")
	step("republish again")
	if va := fleetValue(t, a, now, day); va != 760 {
		t.Fatalf("after republishing: fleet total %d, want 760", va)
	}
	if fields, _ := r.Do("HLEN", ca.TotalKey(calendar.Day, day.Start, day.ID)); fields != "2" {
		t.Fatalf("the counter's hash has %s fields; want one per accountant", fields)
	}

	// Redis loses everything.
	r.Restart(t, redistest.Empty)
	waitUp(t, ca)
	waitUp(t, cb)
	a.Refresh(ctx) // sees the epoch change: all of a's totals go again
	// Until b publishes again Redis holds none of its 60: a still counts
	// them (a field never falls within its period), and so does the total
	// a reads once its own 700 are back.
	if va := fleetValue(t, a, now, day); va != 760 {
		t.Fatalf("after Redis lost its data, before b published again: fleet total on a %d, want 760 (b's spend forgotten)", va)
	}
	if err := a.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	a.Refresh(ctx)
	if va := fleetValue(t, a, now, day); va != 760 {
		t.Fatalf("after Redis lost its data and a published again: fleet total on a %d, want 760", va)
	}
	b.Refresh(ctx)
	step("after the loss")
	if va, vb := fleetValue(t, a, now, day), fleetValue(t, b, now, day); va != 760 || vb != 760 {
		t.Fatalf("after Redis lost its data: fleet total on a %d, on b %d; want 760 again", va, vb)
	}
	if a.Stale() != "" {
		t.Errorf("fresh totals reported stale: %s", a.Stale())
	}
	// Redis gone: the others' totals are kept, and after StaleAfter said to
	// be stale.
	r.Kill()
	now = now.Add(StaleAfter + time.Second)
	a.Refresh(ctx)
	if a.Stale() == "" {
		t.Error("totals not read for longer than StaleAfter are not reported stale")
	}
	if va := fleetValue(t, a, now, day); va != 760 {
		t.Errorf("with Redis down the last fleet total should stand: %d", va)
	}
}
