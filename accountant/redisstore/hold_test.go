package redisstore

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/store"
	"github.com/tokentriage/tokentriage/internal/redistest"
	"github.com/tokentriage/tokentriage/shared/calendar"
)

// holdStep is a budget hold of dearest cost n (least cost least) on a
// budget of amount in the day of now.
func holdStep(id string, now time.Time, amount, n, least int64, lease time.Duration) RateStep {
	return RateStep{ID: id, N: n, Hold: &Hold{Amount: amount, Unit: calendar.Day,
		Start: calendar.Start(calendar.Day, now).Unix(), Least: least, Lease: lease}}
}

// TestHoldsCountWithFleetTotals: a hold counts against every accountant's
// published total plus every live hold; a call that does not fit whole
// holds what is left when its least cost fits, else it is refused; a
// release frees its hold once (a second release finds nothing) and raises
// the recording accountant's published total in the same step, so the
// call's cost is never out of both; a publish that read its counters
// before never lowers that back; a hold past its lease stops counting.
func TestHoldsCountWithFleetTotals(t *testing.T) {
	r := redistest.Start(t)
	ctx := context.Background()
	now := testNoon()
	clock := func() time.Time { return now }
	ca, cb := testClient(t, r), testClient(t, r)
	a := NewFleet(ca, "acct-a", clock, nil)
	b := NewFleet(cb, "acct-b", clock, nil)
	id := "team_day|budget_usd|org:acme/team:ml||day|"
	day := store.Key{ID: id, Unit: calendar.Day, Start: calendar.Start(calendar.Day, now).Unix()}
	lease := 15 * time.Minute

	// acct-b has published 300 of a 1,000 budget.
	if _, err := b.Add(ctx, []store.Delta{{Key: day, N: 300}}, nil); err != nil {
		t.Fatal(err)
	}
	b.Refresh(ctx)
	if err := b.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	take := func(rid string, n, least int64, at time.Time) (allowed bool, held, used int64) {
		t.Helper()
		res, err := ca.Take(ctx, at, rid, []RateStep{holdStep(id, now, 1000, n, least, lease)})
		if err != nil {
			t.Fatal(err)
		}
		return res[0].Allowed, res[0].Limit, res[0].Remaining
	}
	if ok, held, used := take("tt_1", 400, 10, now); !ok || held != 400 || used != 300 {
		t.Fatalf("first hold: allowed %v held %d used %d; want true 400 300", ok, held, used)
	}
	// 700 spent or held: a 500 call lowered to what is left holds 300.
	if ok, held, used := take("tt_2", 500, 10, now); !ok || held != 300 || used != 700 {
		t.Fatalf("second hold: allowed %v held %d used %d; want true 300 700", ok, held, used)
	}
	if ok, _, used := take("tt_3", 5, 1, now); ok || used != 1000 {
		t.Fatalf("third hold on a budget all held: allowed %v used %d; want refused at 1000", ok, used)
	}
	// Of the 1,000, the two calls in flight hold 700 (ResetAfter carries
	// it, in nanodollars): the refusal is theirs, not spend's.
	if res, err := ca.Take(ctx, now, "tt_3", []RateStep{holdStep(id, now, 1000, 5, 1, lease)}); err != nil || res[0].Allowed || int64(res[0].ResetAfter) != 700 {
		t.Fatalf("the refusal: %+v, %v; want 700 held by calls in flight", res, err)
	}

	// tt_1's row is recorded on acct-a: it cost 250.
	if _, err := a.Add(ctx, []store.Delta{{Key: day, N: 250}}, nil); err != nil {
		t.Fatal(err)
	}
	rel := []HoldRelease{{Unit: calendar.Day, Start: day.Start, ID: id, RID: "tt_1"}}
	if n, err := a.ReleaseHolds(ctx, rel, 0); err != nil || n != 1 {
		t.Fatalf("release: %d, %v; want 1 hold released", n, err)
	}
	if n, err := a.ReleaseHolds(ctx, rel, 0); err != nil || n != 0 {
		t.Fatalf("a second release of the same request: %d, %v; want nothing", n, err)
	}
	// 300 (b) + 250 (a, published by the release) + 300 (tt_2) = 850.
	if ok, held, used := take("tt_4", 150, 150, now); !ok || held != 150 || used != 850 {
		t.Fatalf("after the release: allowed %v held %d used %d; want true 150 850", ok, held, used)
	}
	// A publish that read acct-a's counters before the 250 never lowers
	// its field.
	if err := ca.rdb.HSet(ctx, ca.key("total:day:"+strconv.FormatInt(day.Start, 10)+":"+id), "acct-a", "250").Err(); err != nil {
		t.Fatal(err)
	}
	if err := publishScript.Run(ctx, ca.rdb, nil, ca.prefix, "acct-a", "day", strconv.FormatInt(day.Start, 10), id, "100", strconv.FormatInt(now.Add(48*time.Hour).UnixMilli(), 10)).Err(); err != nil {
		t.Fatal(err)
	}
	if got, _ := ca.rdb.HGet(ctx, ca.key("total:day:"+strconv.FormatInt(day.Start, 10)+":"+id), "acct-a").Result(); got != "250" {
		t.Fatalf("a stale publish left acct-a's total at %s; want 250", got)
	}
	// Past the lease, tt_2's and tt_4's holds stop counting: 550 spent.
	if ok, held, used := take("tt_5", 400, 400, now.Add(lease+time.Second)); !ok || held != 400 || used != 550 {
		t.Fatalf("after the lease: allowed %v held %d used %d; want true 400 550", ok, held, used)
	}
}

// TestConcurrentHoldsNeverPassTheCap: many takers at once never hold more
// than the budget, whatever the interleaving.
func TestConcurrentHoldsNeverPassTheCap(t *testing.T) {
	r := redistest.Start(t)
	ctx := context.Background()
	now := time.Now()
	id := "d|budget_usd|__global||day|"
	const amount, dearest, least = 10_000, 700, 100
	var mu sync.Mutex
	total := int64(0)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		c := testClient(t, r)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 8; i++ {
				res, err := c.Take(ctx, time.Time{}, "tt_"+strconv.Itoa(w)+"_"+strconv.Itoa(i), []RateStep{holdStep(id, now, amount, dearest, least, time.Minute)})
				if err != nil {
					t.Error(err)
					return
				}
				if res[0].Allowed {
					mu.Lock()
					total += res[0].Limit
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if total != amount {
		t.Fatalf("64 takers held %d of a %d budget; want exactly all of it, never more", total, amount)
	}
}
