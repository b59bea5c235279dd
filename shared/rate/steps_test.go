package rate

import (
	"testing"
	"time"
)

// t0 is the instant of seed 000's budget capture (22 days before
// 2026-09-01); it is a whole multiple of every window used below.
var t0 = time.Date(2026, 8, 9, 20, 44, 50, 0, time.UTC)

// instants returns t0…t9, d apart.
func instants(d time.Duration) [10]time.Time {
	var ts [10]time.Time
	for i := range ts {
		ts[i] = t0.Add(time.Duration(i) * d)
	}
	return ts
}

type opKind uint8

const (
	opTake opKind = iota
	opPeek
	opAdjust
)

// step is one line of a step table: an operation at an instant, and what
// the result must be (for opAdjust, the Peek after it).
type step struct {
	at   time.Time
	op   opKind
	n    int64 // cost, or delta for opAdjust
	want Result
}

func ok(limit, remaining int64, reset time.Duration) Result {
	return Result{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset}
}

func no(limit, remaining int64, retry, reset time.Duration) Result {
	return Result{Limit: limit, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

func unfit(limit, remaining int64, reset time.Duration) Result {
	return Result{Limit: limit, Remaining: remaining, ResetAfter: reset, Unfittable: true}
}

func runSteps(t *testing.T, a Algorithm, p Params, steps []step) {
	t.Helper()
	runPhases(t, a, phase{p, steps})
}

// phase is a run of steps under one Params. The cell carries over from one
// phase to the next, as a counter does across a reload that edits its
// limit's amount or burst (seed 004: the counter and its usage are kept).
type phase struct {
	p     Params
	steps []step
}

func runPhases(t *testing.T, a Algorithm, phases ...phase) {
	t.Helper()
	var s State
	i := 0
	for _, ph := range phases {
		p := ph.p
		for _, st := range ph.steps {
			var got Result
			switch st.op {
			case opTake:
				var next State
				got, next = Take(a, s, st.at, st.n, p)
				if !got.Allowed && next != s {
					t.Errorf("step %d: refused take changed the state from %+v to %+v", i, s, next)
				}
				s = next
			case opPeek:
				got = Peek(a, s, st.at, p)
			case opAdjust:
				s = Adjust(a, s, st.at, st.n, p)
				got = Peek(a, s, st.at, p)
			}
			if got != st.want {
				t.Errorf("step %d: %s %+v at t0+%v n=%d:\n got %+v\nwant %+v", i, a, p, st.at.Sub(t0), st.n, got, st.want)
			}
			back, err := DecodeState(s.AppendBinary(nil))
			if err != nil || back != s {
				t.Errorf("step %d: state %+v does not survive its encoding: %+v, %v", i, s, back, err)
			}
			i++
		}
	}
}

func TestGCRASeedFigures(t *testing.T) {
	// Seed 002: a 20000-token tpm window and one 16,391-token reserve
	// leaves 3609; the next identical reserve is told 38.346 s (39 on the
	// wire). An rpm of 300/min with burst 60 leaves 59 after one request.
	// An rpm of 3/min refuses the fourth request for 20 s.
	tpm := Params{Amount: 20000, Period: time.Minute, Burst: 20000}
	runSteps(t, GCRA, tpm, []step{
		{t0, opTake, 16391, ok(20000, 3609, 49173*time.Millisecond)},
		{t0, opTake, 16391, no(20000, 3609, 38346*time.Millisecond, 49173*time.Millisecond)},
	})
	runSteps(t, GCRA, Params{Amount: 300, Period: time.Minute, Burst: 60}, []step{
		{t0, opTake, 1, ok(60, 59, 200*time.Millisecond)},
	})
	runSteps(t, GCRA, Params{Amount: 3, Period: time.Minute}, []step{
		{t0, opTake, 1, ok(3, 2, 20*time.Second)},
		{t0, opTake, 1, ok(3, 1, 40*time.Second)},
		{t0, opTake, 1, ok(3, 0, time.Minute)},
		{t0, opTake, 1, no(3, 0, 20*time.Second, time.Minute)},
	})
}

func TestGCRASteps(t *testing.T) {
	// 300 per minute, burst 60: emission interval 200 ms.
	p := Params{Amount: 300, Period: time.Minute, Burst: 60}
	t0, t1, t2, _, t4, _, _, _, _, t9 := unpack(instants(100 * time.Millisecond))
	runSteps(t, GCRA, p, []step{
		{t0, opPeek, 0, ok(60, 60, 0)},                                           // 0: fresh cell, full burst
		{t0, opTake, 60, ok(60, 0, 12*time.Second)},                              // 1: a drained key admits the whole burst at once
		{t0, opTake, 1, no(60, 0, 200*time.Millisecond, 12*time.Second)},         // 2
		{t1, opTake, 1, no(60, 0, 100*time.Millisecond, 11900*time.Millisecond)}, // 3
		{t2, opTake, 1, ok(60, 0, 12*time.Second)},                               // 4: one per emission interval
		{t2, opTake, 61, unfit(60, 0, 12*time.Second)},                           // 5: more than the burst never fits
		{t4, opPeek, 0, ok(60, 1, 11800*time.Millisecond)},                       // 6
		{t4, opAdjust, -5, ok(60, 6, 10800*time.Millisecond)},                    // 7: credit
		{t4, opAdjust, 10, ok(60, 0, 12800*time.Millisecond)},                    // 8: debit past the cap
		{t4, opAdjust, -1000, ok(60, 60, 0)},                                     // 9: a credit stops at drained
		{t9, opTake, 0, ok(60, 60, 0)},                                           // 10: a probe takes nothing
		{t9, opTake, -3, ok(60, 60, 0)},                                          // 11: a negative cost is a probe
	})
}

func TestGCRAUnevenInterval(t *testing.T) {
	// 7 per minute: the emission interval 8.571428571428… s is not a whole
	// number of nanoseconds. 7,000 takes at one instant must hold exactly
	// 1,000 minutes, not 7,000 rounded intervals.
	p := Params{Amount: 7, Period: time.Minute, Burst: 7000}
	var s State
	var r Result
	for i := 0; i < 7000; i++ {
		r, s = Take(GCRA, s, t0, 1, p)
		if !r.Allowed {
			t.Fatalf("step %d: refused: %+v", i, r)
		}
	}
	if r.Remaining != 0 || r.ResetAfter != 1000*time.Minute {
		t.Errorf("after 7,000 takes: %+v; want remaining 0, reset after exactly 1000m", r)
	}
	if r := Peek(GCRA, s, t0.Add(1000*time.Minute-time.Nanosecond), p); r.Remaining != 6999 || r.ResetAfter != time.Nanosecond {
		t.Errorf("1 ns before drained: %+v; want remaining 6999, reset after 1ns", r)
	}
	if r := Peek(GCRA, s, t0.Add(1000*time.Minute), p); r.Remaining != 7000 || r.ResetAfter != 0 {
		t.Errorf("at 1000m: %+v; want drained", r)
	}
}

func TestFixedWindowSteps(t *testing.T) {
	// 3 per 10 s window; t0 is a window start.
	p := Params{Amount: 3, Period: 10 * time.Second, Burst: 99}
	t0, t1, t2, t3, t4, t5, t6, t7, _, t9 := unpack(instants(3 * time.Second))
	runSteps(t, FixedWindow, p, []step{
		{t0, opTake, 1, ok(3, 2, 10*time.Second)},               // 0: burst is ignored
		{t1, opTake, 2, ok(3, 0, 7*time.Second)},                // 1
		{t2, opTake, 1, no(3, 0, 4*time.Second, 4*time.Second)}, // 2: until the window ends
		{t3, opTake, 1, no(3, 0, time.Second, time.Second)},     // 3
		{t4, opTake, 3, ok(3, 0, 8*time.Second)},                // 4: a new window at t0+10s
		{t5, opTake, 4, unfit(3, 0, 5*time.Second)},             // 5
		{t6, opAdjust, -2, ok(3, 2, 2*time.Second)},             // 6
		{t6, opAdjust, 70000, ok(3, 0, 2*time.Second)},          // 7: saturates at 65,535
		{t7, opPeek, 0, ok(3, 3, 0)},                            // 8: t0+21s, the third window
		{t9, opTake, 3, ok(3, 0, 3*time.Second)},                // 9: t0+27s
	})
}

func TestFixedWindowCapsAt65535(t *testing.T) {
	p := Params{Amount: 100000, Period: time.Hour}
	hour := t0.Truncate(time.Hour)
	runSteps(t, FixedWindow, p, []step{
		{hour, opPeek, 0, ok(65535, 65535, 0)},
		{hour, opTake, 65535, ok(65535, 0, time.Hour)},
		{hour, opTake, 65536, unfit(65535, 0, time.Hour)},
	})
}

func TestSlidingWindowSteps(t *testing.T) {
	// Seed 003's example: 2,000 per hour; 1,200 in the 13:00 window and
	// 500 since 14:00 count 1,300 at 14:20, leaving 700.
	p := Params{Amount: 2000, Period: time.Hour}
	at := func(h, m, s int) time.Time { return time.Date(2026, 8, 9, h, m, s, 0, time.UTC) }
	runSteps(t, SlidingWindow, p, []step{
		{at(13, 10, 0), opTake, 1200, ok(2000, 800, 110*time.Minute)},                           // 0
		{at(14, 5, 0), opTake, 500, ok(2000, 400, 115*time.Minute)},                             // 1: 1200·55/60 = 1100 carried
		{at(14, 20, 0), opPeek, 0, ok(2000, 700, 100*time.Minute)},                              // 2: 800 carried, 1,300 counted
		{at(14, 20, 0), opTake, 700, ok(2000, 0, 100*time.Minute)},                              // 3
		{at(14, 20, 0), opTake, 1, no(2000, 0, 3*time.Second, 100*time.Minute)},                 // 4: 799 carried at 14:20:03
		{at(14, 20, 2), opTake, 1, no(2000, 0, time.Second, 100*time.Minute-2*time.Second)},     // 5
		{at(14, 20, 3), opTake, 1, ok(2000, 0, 100*time.Minute-3*time.Second)},                  // 6
		{at(14, 30, 0), opTake, 1000, no(2000, 199, 40*time.Minute+2497918402, 90*time.Minute)}, // 7: 1,201 in this window: wait into the next until 1201·(3600−f)/3600 ≤ 1000
		{at(14, 30, 0), opTake, 2001, unfit(2000, 199, 90*time.Minute)},                         // 8
		{at(15, 0, 0), opPeek, 0, ok(2000, 799, time.Hour)},                                     // 9: all of the 14:00 window carries at 15:00
		{at(15, 0, 0), opAdjust, -1300, ok(2000, 2000, 0)},                                      // 10: cur is 0, so the credit comes out of prev
		{at(16, 30, 0), opAdjust, 5, ok(2000, 1995, 90*time.Minute)},                            // 11
		{at(18, 0, 0), opPeek, 0, ok(2000, 2000, 0)},                                            // 12: two windows later, empty
	})
}

func TestTokenBucketSteps(t *testing.T) {
	// Capacity 5, refilled 2 per 3 s (one token every 1.5 s).
	p := Params{Amount: 2, Period: 3 * time.Second, Burst: 5}
	t0, t1, t2, t3, _, _, t6, _, _, t9 := unpack(instants(time.Second))
	runSteps(t, TokenBucket, p, []step{
		{t0, opPeek, 0, ok(5, 5, 0)},                                           // 0: a fresh bucket is full
		{t0, opTake, 5, ok(5, 0, 7500*time.Millisecond)},                       // 1
		{t1, opTake, 1, no(5, 0, 500*time.Millisecond, 6500*time.Millisecond)}, // 2: 2/3 of a token so far
		{t2, opTake, 1, ok(5, 0, 7*time.Second)},                               // 3: 1⅓ tokens, one taken
		{t3, opTake, 6, unfit(5, 1, 6*time.Second)},                            // 4
		{t3, opAdjust, 4, ok(5, 0, 12*time.Second)},                            // 5: debit below zero, to −3
		{t6, opTake, 2, no(5, 0, 4500*time.Millisecond, 9*time.Second)},        // 6: −1 now, 3 tokens short
		{t6, opAdjust, -100, ok(5, 5, 0)},                                      // 7: a credit stops at full
		{t9, opTake, 5, ok(5, 0, 7500*time.Millisecond)},                       // 8
	})
}

func TestNoCapacity(t *testing.T) {
	for _, a := range []Algorithm{GCRA, FixedWindow, SlidingWindow, TokenBucket, 0, 9} {
		for _, p := range []Params{{}, {Amount: 5}, {Period: time.Second}, {Amount: -1, Period: time.Second}} {
			r, s := Take(a, State{}, t0, 1, p)
			if r != (Result{Unfittable: true}) || !s.IsZero() {
				t.Errorf("%s %+v: take 1 = %+v, %+v; want unfittable and no state", a, p, r, s)
			}
			if r := Peek(a, State{}, t0, p); r != (Result{Allowed: true}) {
				t.Errorf("%s %+v: peek = %+v", a, p, r)
			}
			if s := Adjust(a, State{}, t0, 5, p); !s.IsZero() {
				t.Errorf("%s %+v: adjust wrote %+v", a, p, s)
			}
		}
	}
}

func TestForeignStateReadsFresh(t *testing.T) {
	p := Params{Amount: 10, Period: time.Minute}
	_, g := Take(GCRA, State{}, t0, 10, p)
	for _, a := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket} {
		if r := Peek(a, g, t0, p); r.Remaining != 10 {
			t.Errorf("%s reading a gcra cell: %+v; want a fresh cell", a, r)
		}
	}
}

func unpack(ts [10]time.Time) (a, b, c, d, e, f, g, h, i, j time.Time) {
	return ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], ts[6], ts[7], ts[8], ts[9]
}
