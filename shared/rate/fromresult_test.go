package rate

import (
	"math/rand/v2"
	"testing"
	"time"
)

// since reads the cell rebuilt from r at now: what a probe sees, and the
// wait for one more unit (0 when one fits).
func since(a Algorithm, r Result, at, now time.Time, p Params) (Result, time.Duration) {
	s := FromResult(a, r, at, p)
	res := Peek(a, s, now, p)
	var next time.Duration
	if res.Remaining <= 0 {
		one, _ := Take(a, s, now, 1, p)
		next = one.RetryAfter
	}
	return res, next
}

// TestFromResultDrains: a full cell's last answer, read a while later, is the
// cell drained by then, not the answer as it was.
func TestFromResultDrains(t *testing.T) {
	p := Params{Amount: 30, Period: time.Minute}
	var s State
	var r Result
	for i := 0; i < 31; i++ {
		r, s = Take(GCRA, s, t0, 1, p)
	}
	if r.Allowed || r.Remaining != 0 || r.RetryAfter != 2*time.Second || r.ResetAfter != time.Minute {
		t.Fatalf("the 31st of 30: %+v", r)
	}
	for _, c := range []struct {
		after     time.Duration
		remaining int64
		next      time.Duration
	}{
		{0, 0, 2 * time.Second},
		{time.Second, 0, time.Second},
		{30 * time.Second, 15, 0},
		{time.Minute, 30, 0},
		{time.Hour, 30, 0},
	} {
		got, next := since(GCRA, r, t0, t0.Add(c.after), p)
		if got.Remaining != c.remaining || next != c.next || got.ResetAfter != max(time.Minute-c.after, 0) {
			t.Errorf("gcra %v after the answer: %+v next %v; want remaining %d, next %v", c.after, got, next, c.remaining, c.next)
		}
	}

	// A fixed window is full until its end, then empty.
	s, start := State{}, t0.Add(20*time.Second) // 10 s into a minute
	for i := 0; i < 31; i++ {
		r, s = Take(FixedWindow, s, start, 1, p)
	}
	if got, next := since(FixedWindow, r, start, start.Add(49*time.Second), p); got.Remaining != 0 || next != time.Second {
		t.Errorf("fixed_window 1 s before its end: %+v next %v", got, next)
	}
	if got, next := since(FixedWindow, r, start, start.Add(50*time.Second), p); got.Remaining != 30 || next != 0 || got.ResetAfter != 0 {
		t.Errorf("fixed_window at its end: %+v next %v", got, next)
	}
}

// TestFromResultNeverReadsEmptier: over random traffic, the cell FromResult
// rebuilds from an answer, read at any later instant, never shows more room
// than the cell itself has then; gcra and token_bucket show at most one
// unit less, fixed_window and gcra with a period a whole multiple of the
// amount exactly the cell, and every algorithm shows it drained once the
// answer's ResetAfter has passed.
func TestFromResultNeverReadsEmptier(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, a := range []Algorithm{GCRA, TokenBucket, FixedWindow, SlidingWindow} {
		for _, p := range []Params{
			{Amount: 30, Period: time.Minute},
			{Amount: 7, Period: time.Second},
			{Amount: 1000, Period: time.Minute, Burst: 1500},
			{Amount: 3, Period: 10 * time.Second},
		} {
			for run := 0; run < 300; run++ {
				var s State
				var r Result
				now := t0.Add(time.Duration(rng.Int64N(int64(p.Period))))
				for n := rng.IntN(3 * int(p.Amount)); n >= 0; n-- {
					now = now.Add(time.Duration(rng.Int64N(int64(p.Period) / 10)))
					r, s = Take(a, s, now, 1+rng.Int64N(2), p)
				}
				at := now
				for k := 0; k < 6; k++ {
					later := at.Add(time.Duration(rng.Int64N(3 * int64(p.Period))))
					if k == 0 {
						later = at.Add(r.ResetAfter)
					}
					truth := Peek(a, s, later, p)
					got, next := since(a, r, at, later, p)
					if got.Remaining > truth.Remaining {
						t.Fatalf("%v %+v: the rebuilt cell reads %d left at +%v, the cell %d (answer %+v)", a, p, got.Remaining, later.Sub(at), truth.Remaining, r)
					}
					exact := a == FixedWindow || (a == GCRA || a == TokenBucket) && int64(p.Period)%p.Amount == 0
					if exact && got.Remaining != truth.Remaining || (a == GCRA || a == TokenBucket) && got.Remaining < truth.Remaining-1 {
						t.Fatalf("%v %+v: the rebuilt cell reads %d left at +%v, the cell %d (answer %+v)", a, p, got.Remaining, later.Sub(at), truth.Remaining, r)
					}
					if k == 0 && got.Remaining != got.Limit {
						t.Fatalf("%v %+v: not drained at the answer's ResetAfter %v: %+v (answer %+v)", a, p, r.ResetAfter, got, r)
					}
					if got.Remaining > 0 && next != 0 || got.Remaining <= 0 && next <= 0 {
						t.Fatalf("%v %+v: %d left and the next unit in %v", a, p, got.Remaining, next)
					}
					if got.Remaining <= 0 {
						if one, _ := Take(a, s, later.Add(next), 1, p); !one.Allowed {
							t.Fatalf("%v %+v: the cell refuses a unit at the next %v the rebuilt cell names: %+v", a, p, next, one)
						}
					}
				}
			}
		}
	}
}
