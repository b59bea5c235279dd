package redisstore

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/redistest"
	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/rate"
)

// lease runs one lease operation and fails the test on an error.
func lease(t *testing.T, c *Client, op LeaseOp) LeaseAnswer {
	t.Helper()
	_, ans, err := c.Lease(context.Background(), []LeaseOp{op}, 0)
	if err != nil {
		t.Fatalf("lease %+v: %v", op, err)
	}
	if ans[0].Err != nil {
		t.Fatalf("lease %+v: %v", op, ans[0].Err)
	}
	return ans[0]
}

// TestRateLeaseNeverLeasesMoreThanTheAmount: many replicas take leases of
// one cell at once, each asking for what it needs and more ahead of need;
// for each algorithm the units granted in one window (an hour, so nothing
// drains) add up to the amount exactly: every unit is leased once, none
// twice.
func TestRateLeaseNeverLeasesMoreThanTheAmount(t *testing.T) {
	r := redistest.Start(t)
	c := testClient(t, r)
	for _, alg := range []rate.Algorithm{rate.GCRA, rate.FixedWindow, rate.SlidingWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			op := LeaseOp{Kind: LeaseRate, ID: "burst|" + alg.String(), Alg: alg,
				Params: rate.Params{Amount: 30, Period: time.Hour}, Need: 1, Extra: 4, Hold: time.Minute}
			var mu sync.Mutex
			granted, refused := int64(0), 0
			var wg sync.WaitGroup
			for w := 0; w < 6; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 10; i++ {
						_, ans, err := c.Lease(context.Background(), []LeaseOp{op}, 0)
						if err != nil || ans[0].Err != nil {
							t.Errorf("lease: %v %v", err, ans)
							return
						}
						mu.Lock()
						granted += ans[0].Granted
						if !ans[0].Allowed {
							refused++
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if granted != 30 || refused == 0 {
				t.Fatalf("granted %d units of 30 to 60 asks (%d refused); want exactly 30", granted, refused)
			}
		})
	}
}

// TestRateLeaseGrants: need first, then extra up to half of what is left;
// refused, the part that fits and the wait for all of it; a lot's anchor
// and validity.
func TestRateLeaseGrants(t *testing.T) {
	r := redistest.Start(t)
	c := testClient(t, r)
	p := rate.Params{Amount: 10, Period: time.Hour}
	op := LeaseOp{Kind: LeaseRate, ID: "g", Alg: rate.FixedWindow, Params: p, Need: 2, Extra: 100, Hold: time.Second}
	a := lease(t, c, op)
	// 2, then half of the 8 left.
	if !a.Allowed || a.Granted != 6 || a.Result.Remaining != 4 || a.Result.Limit != 10 {
		t.Fatalf("first lease: %+v; want 2 and 4 more granted, 4 left", a)
	}
	idx := time.Now().UnixNano() / int64(time.Hour)
	if a.Anchor != strconv.FormatInt(idx, 10) || a.Valid <= 0 || a.Valid > time.Hour {
		t.Fatalf("a fixed window's lot: anchor %q valid %s; want window %d and the rest of it", a.Anchor, a.Valid, idx)
	}
	op.Need, op.Extra = 5, 0
	b := lease(t, c, op)
	if b.Allowed || b.Granted != 4 || b.Result.RetryAfter <= 0 || b.Result.Remaining != 0 {
		t.Fatalf("asking 5 of 4 left: %+v; want the 4 that fit, refused, with the wait", b)
	}
	// Giving back 3 units of this window's lot makes them free again.
	op.Need, op.Back, op.Anchor = 0, 3, a.Anchor
	if c := lease(t, c, op); c.Result.Remaining != 3 {
		t.Fatalf("after giving back 3: %+v; want 3 left", c)
	}
	// A lot of another window gives nothing back here.
	op.Anchor = strconv.FormatInt(idx-5, 10)
	if c := lease(t, c, op); c.Result.Remaining != 3 {
		t.Fatalf("giving back a lot of an old window: %+v; want nothing given back", c)
	}

	// gcra: the lot's anchor is the instant; what is given back is less
	// what may have drained since (an hour's amount of 3600: one a second).
	g := LeaseOp{Kind: LeaseRate, ID: "gcra", Alg: rate.GCRA, Params: rate.Params{Amount: 3600, Period: time.Hour}, Need: 100, Hold: time.Second}
	ga := lease(t, c, g)
	if !ga.Allowed || ga.Granted != 100 || ga.Valid != time.Second || ga.Result.Remaining != 3500 {
		t.Fatalf("gcra lease: %+v", ga)
	}
	g.Need, g.Back, g.Anchor = 0, 100, ga.Anchor
	gb := lease(t, c, g)
	if gb.Result.Remaining < 3597 || gb.Result.Remaining > 3600 {
		t.Fatalf("gcra after giving back 100 at once: remaining %d; want about 3600 (at most what drained since not given back)", gb.Result.Remaining)
	}
	// An anchor an hour old gives back nothing: all of it has drained.
	g.Anchor = strconv.FormatInt(time.Now().Add(-time.Hour).UnixNano(), 10)
	g.Need = 10
	lease(t, c, g)
	g.Need = 0
	before := lease(t, c, g).Result.Remaining
	g.Back = 10
	if after := lease(t, c, g).Result.Remaining; after > before+1 {
		t.Fatalf("giving back units of a lot an hour old: remaining %d -> %d; want nothing back", before, after)
	}
}

// TestSlidingLeaseBackToThePreviousWindow: units given back after their
// window ended leave the previous window's count (which weighs on the
// current one), not the current window's.
func TestSlidingLeaseBackToThePreviousWindow(t *testing.T) {
	r := redistest.Start(t)
	c := testClient(t, r)
	p := rate.Params{Amount: 100, Period: 2 * time.Second}
	op := LeaseOp{Kind: LeaseRate, ID: "s", Alg: rate.SlidingWindow, Params: p, Need: 80, Hold: time.Second}
	var a LeaseAnswer
	for {
		// Early in a window, so the next one is reached while testing.
		if time.Now().UnixNano()%int64(p.Period) < int64(500*time.Millisecond) {
			a = lease(t, c, op)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	k, _ := strconv.ParseInt(a.Anchor, 10, 64)
	for time.Now().UnixNano()/int64(p.Period) == k {
		time.Sleep(10 * time.Millisecond)
	}
	op.Need, op.Back = 0, 80
	op.Anchor = a.Anchor
	if b := lease(t, c, op); b.Result.Remaining != 100 {
		t.Fatalf("the next window after giving back the whole lot of the previous one: %+v; want all 100 free", b)
	}
}

// TestSpendLease: a reserve-mode counter's fleet spend is every
// accountant's total and every lease not yet spent; a replica's published
// spend moves a call's cost from its lease to the total; a replica that
// goes silent keeps what its calls hold and then nothing; and after Redis
// loses its data a replica's own count of its lease comes back with its
// next call.
func TestSpendLease(t *testing.T) {
	r := redistest.Start(t)
	c := testClient(t, r)
	ctx := context.Background()
	now := time.Now()
	start := calendar.Start(calendar.Day, now).Unix()
	id := "b|budget_usd|__global||day|"
	base := LeaseOp{Kind: LeaseSpend, ID: id, Unit: calendar.Day, Start: start, Amount: 1000,
		Free: time.Hour, HoldTTL: 2 * time.Hour}
	op := func(rep string, need, least, extra, back, granted, held int64) LeaseOp {
		o := base
		o.Replica, o.Need, o.Least, o.Extra, o.Back, o.Granted, o.Held = rep, need, least, extra, back, granted, held
		return o
	}
	a := lease(t, c, op("r1", 300, 10, 1000, 0, 0, 0))
	if !a.Allowed || a.Granted != 650 || a.Spent != 0 || a.Left != 350 {
		t.Fatalf("first spend lease: %+v; want 300 and half of the 700 left", a)
	}
	b := lease(t, c, op("r2", 400, 100, 0, 0, 0, 400))
	if b.Allowed || b.Granted != 350 || b.Spent != 650 {
		t.Fatalf("a dearest cost past what is left: %+v; want all 350 left (least fits)", b)
	}
	if d := lease(t, c, op("r2", 50, 10, 0, 0, 350, 350)); d.Allowed || d.Granted != 0 || d.Spent != 1000 || d.InFlight != 350 {
		t.Fatalf("nothing left: %+v", d)
	}
	// r1's accountant publishes r1's 200 spent: r1's lease is 450 outstanding,
	// and the total holds the 200: nothing moves.
	f := NewFleet(c, "acct-1", nil, nil)
	ep, _, _ := c.Lease(ctx, nil, 0)
	f.NoteEpoch(ep)
	exp := strconv.FormatInt(calendar.End(calendar.Day, now).Add(keepAfterEnd).UnixMilli(), 10)
	if err := publishScript.Run(ctx, c.rdb, []string{c.LeaseKey(calendar.Day, start, id), c.TotalKey(calendar.Day, start, id)},
		"acct-1", exp, "200", "r1", "200").Err(); err != nil {
		t.Fatal(err)
	}
	if d := lease(t, c, op("r2", 0, 0, 0, 0, 350, 0)); d.Spent != 1000 {
		t.Fatalf("after r1's spend was published: spent %d; want still 1000 (moved from its lease to the total)", d.Spent)
	}
	// r1 gives back 100 of its lease.
	if d := lease(t, c, op("r1", 0, 0, 0, 100, 650, 0)); d.Spent != 900 {
		t.Fatalf("after r1 gave back 100: spent %d; want 900", d.Spent)
	}
	// Redis loses everything; r1 says it was granted 550 and holds 50, r2
	// 350 and holds 0: the leases come back as they say; the total, as
	// its accountant publishes it again.
	r.Restart(t, redistest.Empty)
	waitUp(t, c)
	lease(t, c, op("r1", 0, 0, 0, 0, 550, 50))
	if d := lease(t, c, op("r2", 0, 0, 0, 0, 350, 0)); d.Spent != 900 {
		t.Fatalf("after Redis lost its data and both replicas renewed: spent %d; want 900 (550 and 350, the published 200 not back yet)", d.Spent)
	}
	// A replica silent for longer than Free keeps only what its calls hold.
	short := op("r3", 0, 0, 0, 0, 0, 0)
	short.Free, short.HoldTTL = 50*time.Millisecond, time.Hour
	time.Sleep(100 * time.Millisecond)
	if d := lease(t, c, short); d.Spent != 50 || d.InFlight != 50 {
		t.Fatalf("both replicas silent past Free: %+v; want r1's 50 in flight only", d)
	}
	short.HoldTTL = 60 * time.Millisecond
	if d := lease(t, c, short); d.Spent != 0 {
		t.Fatalf("silent past the hold TTL too: %+v; want nothing", d)
	}
}

// TestSlotsLease: the slots the replicas hold never pass the amount; a
// silent replica's slots lapse; a replica whose slots Redis lost gets them
// back by saying what it holds.
func TestSlotsLease(t *testing.T) {
	r := redistest.Start(t)
	c := testClient(t, r)
	op := func(rep string, need, extra, back, held int64) LeaseOp {
		return LeaseOp{Kind: LeaseSlots, ID: "c|concurrency|__global||", Replica: rep, Amount: 6,
			Need: need, Extra: extra, Back: back, Held: held, Slots: time.Hour}
	}
	if a := lease(t, c, op("r1", 1, 10, 0, 0)); !a.Allowed || a.Granted != 3 || a.Mine != 3 {
		t.Fatalf("first slots: %+v; want 1 and half of the 5 left", a)
	}
	if a := lease(t, c, op("r2", 4, 0, 0, 0)); a.Allowed || a.Granted != 3 || a.Others != 3 {
		t.Fatalf("4 slots of 3 left: %+v", a)
	}
	if a := lease(t, c, op("r1", 0, 0, 2, 3)); a.Mine != 1 {
		t.Fatalf("r1 gives back 2: %+v", a)
	}
	if a := lease(t, c, op("r2", 2, 0, 0, 3)); !a.Allowed || a.Mine != 5 {
		t.Fatalf("r2 takes the 2 given back: %+v", a)
	}
	r.Restart(t, redistest.Empty)
	waitUp(t, c)
	lease(t, c, op("r1", 0, 0, 0, 1))
	if a := lease(t, c, op("r2", 1, 0, 0, 5)); a.Allowed || a.Others != 1 || a.Mine != 5 {
		t.Fatalf("after Redis lost its data: %+v; want both replicas' slots back, none free", a)
	}
	short := op("r3", 1, 0, 0, 0)
	short.Slots = 50 * time.Millisecond
	time.Sleep(100 * time.Millisecond)
	if a := lease(t, c, short); !a.Allowed || a.Others != 0 {
		t.Fatalf("the others silent past the TTL: %+v; want their slots lapsed", a)
	}
}

// TestRestoreAfterDataLoss: a replica holding units of a window's lot
// counts them again into the fresh cell, so the window is as full as
// before Redis lost it.
func TestRestoreAfterDataLoss(t *testing.T) {
	r := redistest.Start(t)
	c := testClient(t, r)
	op := LeaseOp{Kind: LeaseRate, ID: "w", Alg: rate.FixedWindow, Params: rate.Params{Amount: 30, Period: time.Hour}, Need: 20, Hold: time.Second}
	a := lease(t, c, op)
	r.Restart(t, redistest.Empty)
	waitUp(t, c)
	lease(t, c, LeaseOp{Kind: LeaseRestore, ID: "w", Alg: rate.FixedWindow, Params: op.Params, Need: 20, Anchor: a.Anchor})
	op.Need = 0
	if b := lease(t, c, op); b.Result.Remaining != 10 {
		t.Fatalf("after the restore: %+v; want 10 left", b)
	}
}

// TestEpochRebuild: the first epoch an accountant sees is adopted; a new
// one replacing it (Redis lost its data) makes the store rebuild for
// RebuildGrace from when it was made.
func TestEpochRebuild(t *testing.T) {
	r := redistest.Start(t)
	c := testClient(t, r)
	f := NewFleet(c, "a", nil, nil)
	ep, _, err := c.Lease(context.Background(), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.NoteEpoch(ep)
	if !f.Rebuilding().IsZero() {
		t.Fatal("rebuilding on the first epoch seen")
	}
	if _, err := r.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	ep2, _, err := c.Lease(context.Background(), nil, 0)
	if err != nil || ep2.Name == ep.Name {
		t.Fatalf("after FLUSHALL: epoch %q (was %q), %v", ep2.Name, ep.Name, err)
	}
	f.NoteEpoch(ep2)
	if until := f.Rebuilding(); until.IsZero() || time.Until(until) > RebuildGrace {
		t.Fatalf("rebuilding until %v; want within %s", until, RebuildGrace)
	}
}

// TestLeaseAskOnce: an ask asked again (its answer was lost on the way)
// gets the grant recorded for it, not a second one; another ask is granted
// anew.
func TestLeaseAskOnce(t *testing.T) {
	r := redistest.Start(t)
	c := testClient(t, r)
	op := LeaseOp{Kind: LeaseRate, ID: "once", Alg: rate.FixedWindow, Params: rate.Params{Amount: 10, Period: time.Hour}, Need: 3, Hold: time.Second, Ask: "r1:7:1"}
	a := lease(t, c, op)
	b := lease(t, c, op)
	if a.Granted != 3 || b.Granted != 3 || b.Anchor != a.Anchor || b.Result.Remaining != 7 {
		t.Fatalf("the same ask twice: %+v then %+v; want the second to be the first's answer", a, b)
	}
	op.Ask = "r1:7:2"
	if d := lease(t, c, op); d.Granted != 3 || d.Result.Remaining != 4 {
		t.Fatalf("another ask: %+v; want a grant of its own", d)
	}
	s := LeaseOp{Kind: LeaseSpend, ID: "sp", Unit: calendar.Day, Start: calendar.Start(calendar.Day, time.Now()).Unix(), Replica: "r1",
		Amount: 100, Need: 40, Least: 1, Free: time.Hour, HoldTTL: time.Hour, Ask: "r1:7:3"}
	if x, y := lease(t, c, s), lease(t, c, s); x.Granted != 40 || y.Granted != 40 || y.Left != x.Left {
		t.Fatalf("a spend ask twice: %+v then %+v", x, y)
	}
	s.Ask, s.Need = "", 0
	if z := lease(t, c, s); z.Spent != 40 {
		t.Fatalf("after one spend ask answered twice: spent %d; want 40", z.Spent)
	}
}
