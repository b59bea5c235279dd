package redisstore

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/redistest"
	"github.com/tokentriage/tokentriage/shared/rate"
)

// testClient connects to r with a generous deadline (the arithmetic is the
// point here, not the latency) and waits until it is up.
func testClient(t testing.TB, r *redistest.Server) *Client {
	t.Helper()
	c, err := New(Options{Addr: r.Addr, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	waitUp(t, c)
	return c
}

func waitUp(t testing.TB, c *Client) {
	t.Helper()
	for i := 0; !c.Up(); i++ {
		if i > 3000 {
			why, _ := c.Down()
			t.Fatalf("redis at %s never came up: %s", c.Addr(), why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRateScriptMatchesSharedRate drives the script and shared/rate (which
// shared/rate's own tests check against their exact-rational reference)
// with the same random arrivals, costs, corrections and clocks, and
// requires the same decision, the same numbers and the same cell, byte for
// byte, at every step.
func TestRateScriptMatchesSharedRate(t *testing.T) {
	r := redistest.Start(t)
	c := testClient(t, r)
	ctx := context.Background()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("seed %d", seed)

	periods := []time.Duration{time.Nanosecond, 7 * time.Nanosecond, time.Microsecond, time.Millisecond, 999 * time.Millisecond,
		time.Second, time.Minute, 90 * time.Second, time.Hour, 24 * time.Hour, 400 * 24 * time.Hour}
	base := testNoon().UnixNano()
	cases := 300
	if testing.Short() {
		cases = 60
	}
	for n := 0; n < cases; n++ {
		alg := []rate.Algorithm{rate.GCRA, rate.FixedWindow, rate.SlidingWindow}[rng.IntN(3)]
		p := rate.Params{Period: periods[rng.IntN(len(periods))]}
		switch rng.IntN(4) {
		case 0:
			p.Amount = 1 + rng.Int64N(5)
		case 1:
			p.Amount = 1 + rng.Int64N(100)
		case 2:
			p.Amount = 1 + rng.Int64N(70000) // past the window ceiling too
		default:
			p.Amount = 1 + rng.Int64N(1<<40)
		}
		if rng.IntN(2) == 0 {
			p.Burst = 1 + rng.Int64N(2*p.Amount)
		}
		key := fmt.Sprintf("prop|%d", n)
		var st rate.State
		now := base + rng.Int64N(int64(time.Hour))
		for step := 0; step < 40; step++ {
			// Arrivals close together, across windows, and now and then a
			// clock behind the cell's (another replica's).
			switch rng.IntN(6) {
			case 0:
				now -= rng.Int64N(int64(p.Period)/2 + 1)
			case 1:
				now += rng.Int64N(3*int64(p.Period) + 1)
			default:
				now += rng.Int64N(int64(p.Period)/max(p.Amount, 1) + 2)
			}
			at := time.Unix(0, now)
			step := RateStep{ID: key, Alg: alg, Params: p}
			if rng.IntN(5) == 0 {
				step.N = rng.Int64N(2*p.Amount+1) - p.Amount
				if err := c.Adjust(ctx, at, []RateStep{step}, 0); err != nil {
					t.Fatalf("case %d step %d: adjust: %v", n, step.N, err)
				}
				st = rate.Adjust(alg, st, at, step.N, p)
			} else {
				step.N = []int64{0, 1, 1, 1, 2, p.Amount / 3, p.Amount, p.Amount + 1}[rng.IntN(8)]
				got, err := c.Take(ctx, at, []RateStep{step})
				if err != nil {
					t.Fatalf("case %d: take: %v", n, err)
				}
				want, next := rate.Take(alg, st, at, step.N, p)
				if len(got) != 1 || got[0] != want {
					t.Fatalf("case %d (%s %+v) at %d cost %d:\n script %+v\n rate   %+v", n, alg, p, now, step.N, got, want)
				}
				st = next
			}
			cell, _ := r.Do("GET", c.RateKey(key))
			wantCell := string(st.AppendBinary(nil))
			if st.IsZero() {
				wantCell = "(nil)"
			}
			if cell != wantCell {
				t.Fatalf("case %d (%s %+v) at %d: cell %s, shared/rate %s", n, alg, p, now, hex.EncodeToString([]byte(cell)), hex.EncodeToString([]byte(wantCell)))
			}
		}
	}
}

// TestRateScriptStopsAtFirstOver: the steps are evaluated in order; the
// first that refuses ends the script and the ones after it count nothing.
func TestRateScriptStopsAtFirstOver(t *testing.T) {
	r := redistest.Start(t)
	c := testClient(t, r)
	ctx := context.Background()
	now := testNoon()
	p := func(n int64) rate.Params { return rate.Params{Amount: n, Period: time.Minute} }
	steps := []RateStep{
		{ID: "a", Alg: rate.GCRA, Params: p(10), N: 1},
		{ID: "b", Alg: rate.FixedWindow, Params: p(1), N: 1},
		{ID: "c", Alg: rate.SlidingWindow, Params: p(10), N: 1},
	}
	got, err := c.Take(ctx, now, steps)
	if err != nil || len(got) != 3 || !got[2].Allowed {
		t.Fatalf("first request: %+v, %v", got, err)
	}
	got, err = c.Take(ctx, now, steps)
	if err != nil || len(got) != 2 || !got[0].Allowed || got[1].Allowed {
		t.Fatalf("second request: %+v, %v; want a admitted, b refused, c not evaluated", got, err)
	}
	if got[1].RetryAfter != time.Minute-time.Duration(now.UnixNano()%int64(time.Minute)) {
		t.Errorf("b's retry after = %s", got[1].RetryAfter)
	}
	res, err := c.Take(ctx, now, steps[2:])
	if err != nil || res[0].Remaining != 8 {
		t.Fatalf("c after two requests, the second stopped before it: remaining %+v, %v; want 8 (one counted, this one)", res, err)
	}
	// Cells expire: a minute's window is kept a little over two minutes.
	if ttl, _ := r.Do("PTTL", c.RateKey("b")); ttl == "-1" || ttl == "-2" {
		t.Errorf("cell b has no expiry: PTTL %s", ttl)
	}
}

// TestRateScriptServerClock: with no instant given, the script reads the
// server's clock.
func TestRateScriptServerClock(t *testing.T) {
	r := redistest.Start(t)
	c := testClient(t, r)
	step := RateStep{ID: "clock", Alg: rate.GCRA, Params: rate.Params{Amount: 2, Period: time.Hour}, N: 1}
	for i, want := range []bool{true, true, false} {
		got, err := c.Take(context.Background(), time.Time{}, []RateStep{step})
		if err != nil || got[len(got)-1].Allowed != want {
			t.Fatalf("take %d: %+v, %v; want allowed %v", i, got, err, want)
		}
	}
}

// TestRateScriptReloadedAfterFlush: a Redis that lost its scripts (a
// restart, SCRIPT FLUSH) answers NOSCRIPT, and the script is sent again.
func TestRateScriptReloadedAfterFlush(t *testing.T) {
	r := redistest.Start(t)
	c := testClient(t, r)
	step := RateStep{ID: "noscript", Alg: rate.GCRA, Params: rate.Params{Amount: 5, Period: time.Hour}, N: 1}
	if _, err := c.Take(context.Background(), time.Time{}, []RateStep{step}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	got, err := c.Take(context.Background(), time.Time{}, []RateStep{step})
	if err != nil || got[0].Remaining != 3 {
		t.Fatalf("after SCRIPT FLUSH: %+v, %v", got, err)
	}
	if n, _ := r.Do("SCRIPT", "EXISTS", rateScript.Hash()); n != "1" {
		t.Errorf("the script is not loaded again: SCRIPT EXISTS = %s", n)
	}
}

// BenchmarkRateTake is one request's script: one rpm instance per
// algorithm, and a chain of three gcra instances, against a real
// redis-server on loopback.
func BenchmarkRateTake(b *testing.B) {
	r := redistest.Start(b)
	c := testClient(b, r)
	ctx := context.Background()
	p := rate.Params{Amount: 30000, Period: time.Minute}
	for _, bc := range []struct {
		name  string
		steps []RateStep
	}{
		{"gcra", []RateStep{{ID: "g", Alg: rate.GCRA, Params: p, N: 1}}},
		{"gcra_wide", []RateStep{{ID: "w", Alg: rate.GCRA, Params: rate.Params{Amount: 1 << 40, Period: time.Hour}, N: 1}}},
		{"fixed_window", []RateStep{{ID: "f", Alg: rate.FixedWindow, Params: rate.Params{Amount: 65535, Period: time.Minute}, N: 1}}},
		{"sliding_window", []RateStep{{ID: "s", Alg: rate.SlidingWindow, Params: rate.Params{Amount: 65535, Period: time.Minute}, N: 1}}},
		{"gcra_x3", []RateStep{{ID: "g1", Alg: rate.GCRA, Params: p, N: 1}, {ID: "g2", Alg: rate.GCRA, Params: p, N: 1}, {ID: "g3", Alg: rate.GCRA, Params: p, N: 1}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r.Do("CONFIG", "RESETSTAT")
			for b.Loop() {
				if _, err := c.Take(ctx, time.Time{}, bc.steps); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(1, "redis_ops/op")
			b.ReportMetric(r.CommandStat(b, "evalsha", "usec_per_call"), "server_µs/op")
		})
	}
}
