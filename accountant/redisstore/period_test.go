package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/store"
	"github.com/tokentriage/tokentriage/internal/redistest"
	"github.com/tokentriage/tokentriage/shared/calendar"
)

// TestFleetPeriodsBeyondTheUTCDay: a counter of a period in a time zone
// (its key carries its end) is published and read across accountants like
// a UTC day's, once each is told the plan's periods (SetPeriods); the one
// only the other accountant has counted is read too, and an ended one is
// no longer current.
func TestFleetPeriodsBeyondTheUTCDay(t *testing.T) {
	r := redistest.Start(t)
	ctx := context.Background()
	now := testNoon()
	clock := func() time.Time { return now }
	a := NewFleet(testClient(t, r), "acct-a", clock, nil)
	b := NewFleet(testClient(t, r), "acct-b", clock, nil)
	berlin, err := calendar.LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	start, end := calendar.StartIn(calendar.Day, now, berlin), calendar.EndIn(calendar.Day, now, berlin)
	period := store.Key{Unit: calendar.Day, Start: start.Unix(), End: end.Unix()}
	k := period
	k.ID = "berlin_day|budget_usd|org:acme||day@Europe/Berlin|"
	for _, f := range []*Fleet{a, b} {
		f.SetPeriods([]store.Key{period})
	}
	if _, err := b.Add(ctx, []store.Delta{{Key: k, N: 40}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*Fleet{b, a} {
		if err := f.Publish(ctx); err != nil {
			t.Fatal(err)
		}
		f.Refresh(ctx)
	}
	if got := fleetValue(t, a, now, k); got != 40 {
		t.Fatalf("a reads %d of b's Berlin day, want 40", got)
	}
	if _, err := a.Add(ctx, []store.Delta{{Key: k, N: 2}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*Fleet{a, b} {
		if err := f.Publish(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []*Fleet{a, b} {
		f.Refresh(ctx)
	}
	if va, vb := fleetValue(t, a, now, k), fleetValue(t, b, now, k); va != 42 || vb != 42 {
		t.Fatalf("fleet total on a %d, on b %d; want 42", va, vb)
	}
	// After Berlin's midnight the counter is no longer current.
	if got := fleetValue(t, a, end, k); got != 0 {
		t.Errorf("after the period's end: %d", got)
	}
}
