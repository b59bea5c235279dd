package rate

import (
	"testing"
	"time"
)

// Seed 004: editing an amount keeps the counter and the usage it has
// accumulated. Each table below steps one cell through Params edited
// between phases (the period never changes: that would be another
// counter). What a cell has in use survives every edit; a gcra or
// token_bucket cell drains at the amount it is read with, from the instant
// it was last written on.

func TestGCRAAmountEdits(t *testing.T) {
	t12, t84, t94 := t0.Add(12*time.Second), t0.Add(84*time.Second), t0.Add(94*time.Second)
	runPhases(t, GCRA,
		phase{Params{Amount: 3, Period: time.Minute}, []step{
			{t0, opTake, 3, ok(3, 0, time.Minute)},                 // 0: 3 of 3 in use
			{t0, opTake, 1, no(3, 0, 20*time.Second, time.Minute)}, // 1
		}},
		phase{Params{Amount: 10, Period: time.Minute}, []step{
			{t0, opPeek, 0, ok(10, 7, 18*time.Second)}, // 2: amount up: 3 of 10 in use (not 10 of 10), draining 6 s each
			{t0, opTake, 7, ok(10, 0, time.Minute)},    // 3
			{t12, opTake, 2, ok(10, 0, time.Minute)},   // 4: 2 drained in 12 s
			{t12, opTake, 1, no(10, 0, 6*time.Second, time.Minute)},
		}},
		phase{Params{Amount: 5, Period: time.Minute}, []step{
			{t12, opPeek, 0, ok(5, 0, 2*time.Minute)},                 // 6: amount down: 10 in use, 5 over the cap, draining 12 s each
			{t12, opTake, 1, no(5, 0, 72*time.Second, 2*time.Minute)}, // 7: until 4 are in use
			{t12, opTake, 6, unfit(5, 0, 2*time.Minute)},              // 8: the new burst decides what fits at all
			{t84, opTake, 1, ok(5, 0, time.Minute)},                   // 9
		}},
		phase{Params{Amount: 20, Period: time.Minute}, []step{
			{t94, opPeek, 0, ok(20, 18, 5*time.Second)}, // 10: the 10 s since the last write drain at 20/min: 5 − 3⅓ in use
			{t94, opAdjust, 2, ok(20, 16, 11*time.Second)},
		}},
	)
}

func TestGCRABurstEdits(t *testing.T) {
	// 300 per minute: one unit every 200 ms, whatever the burst.
	t14 := t0.Add(14200 * time.Millisecond)
	runPhases(t, GCRA,
		phase{Params{Amount: 300, Period: time.Minute, Burst: 60}, []step{
			{t0, opTake, 60, ok(60, 0, 12*time.Second)}, // 0
		}},
		phase{Params{Amount: 300, Period: time.Minute, Burst: 100}, []step{
			{t0, opPeek, 0, ok(100, 40, 12*time.Second)}, // 1: burst up: 60 of 100 in use
			{t0, opTake, 40, ok(100, 0, 20*time.Second)}, // 2
		}},
		phase{Params{Amount: 300, Period: time.Minute, Burst: 30}, []step{
			{t0, opPeek, 0, ok(30, 0, 20*time.Second)},                                    // 3: burst down: 100 in use, 70 over the cap
			{t0, opTake, 31, unfit(30, 0, 20*time.Second)},                                // 4
			{t0, opTake, 1, no(30, 0, 14200*time.Millisecond, 20*time.Second)},            // 5: until 29 are in use
			{t14.Add(-time.Nanosecond), opTake, 1, no(30, 0, 1, 5800*time.Millisecond+1)}, // 6
			{t14, opTake, 1, ok(30, 0, 6*time.Second)},                                    // 7
		}},
		phase{Params{Amount: 300, Period: time.Minute}, []step{
			{t14, opPeek, 0, ok(300, 270, 6*time.Second)}, // 8: burst back to the amount
		}},
	)
}

func TestTokenBucketEdits(t *testing.T) {
	// 2 tokens per 3 s (one every 1.5 s) at first.
	t3, t6 := t0.Add(3*time.Second), t0.Add(6*time.Second)
	runPhases(t, TokenBucket,
		phase{Params{Amount: 2, Period: 3 * time.Second, Burst: 5}, []step{
			{t0, opTake, 5, ok(5, 0, 7500*time.Millisecond)}, // 0: 5 taken, none left
		}},
		phase{Params{Amount: 2, Period: 3 * time.Second, Burst: 10}, []step{
			{t0, opPeek, 0, ok(10, 5, 7500*time.Millisecond)}, // 1: burst up: 5 of 10 taken, 5 left (not 0)
			{t0, opTake, 5, ok(10, 0, 15*time.Second)},        // 2
		}},
		phase{Params{Amount: 2, Period: 3 * time.Second, Burst: 4}, []step{
			{t3, opPeek, 0, ok(4, 0, 12*time.Second)},                        // 3: burst down: 8 taken, 4 over the cap
			{t3, opTake, 1, no(4, 0, 7500*time.Millisecond, 12*time.Second)}, // 4: until 3 are taken
			{t3, opAdjust, -1, ok(4, 0, 10500*time.Millisecond)},             // 5: a credit: 7 taken
		}},
		phase{Params{Amount: 4, Period: 3 * time.Second, Burst: 4}, []step{
			{t3, opTake, 1, no(4, 0, 3*time.Second, 5250*time.Millisecond)}, // 6: amount up: one every 750 ms
			{t6, opTake, 1, ok(4, 0, 3*time.Second)},                        // 7
		}},
		phase{Params{Amount: 2, Period: 3 * time.Second}, []step{
			{t6, opPeek, 0, ok(2, 0, 6*time.Second)},                        // 8: amount down, burst its default: 4 taken of 2
			{t6, opTake, 3, unfit(2, 0, 6*time.Second)},                     // 9
			{t6, opTake, 1, no(2, 0, 4500*time.Millisecond, 6*time.Second)}, // 10
		}},
	)
}

func TestFixedWindowEdits(t *testing.T) {
	// 10 s windows; t0 starts one. The burst never matters.
	t1, t2, t10 := t0.Add(time.Second), t0.Add(2*time.Second), t0.Add(10*time.Second)
	runPhases(t, FixedWindow,
		phase{Params{Amount: 3, Period: 10 * time.Second}, []step{
			{t0, opTake, 3, ok(3, 0, 10*time.Second)}, // 0
		}},
		phase{Params{Amount: 5, Period: 10 * time.Second}, []step{
			{t1, opPeek, 0, ok(5, 2, 9*time.Second)}, // 1: amount up: 3 of 5 counted
			{t1, opTake, 2, ok(5, 0, 9*time.Second)}, // 2
		}},
		phase{Params{Amount: 4, Period: 10 * time.Second, Burst: 1}, []step{
			{t2, opPeek, 0, ok(4, 0, 8*time.Second)},                // 3: amount down: 5 counted of 4
			{t2, opTake, 1, no(4, 0, 8*time.Second, 8*time.Second)}, // 4: the next window
			{t2, opAdjust, -2, ok(4, 1, 8*time.Second)},             // 5
			{t10, opTake, 4, ok(4, 0, 10*time.Second)},              // 6
		}},
		phase{Params{Amount: 100000, Period: 10 * time.Second}, []step{
			{t10, opPeek, 0, ok(65535, 65531, 10*time.Second)}, // 7: above MaxWindowCount counts as it
		}},
	)
}

func TestSlidingWindowEdits(t *testing.T) {
	// 10 s windows; t0 starts one.
	t5, t15 := t0.Add(5*time.Second), t0.Add(15*time.Second)
	runPhases(t, SlidingWindow,
		phase{Params{Amount: 10, Period: 10 * time.Second}, []step{
			{t0, opTake, 10, ok(10, 0, 20*time.Second)}, // 0
		}},
		phase{Params{Amount: 20, Period: 10 * time.Second}, []step{
			{t5, opPeek, 0, ok(20, 10, 15*time.Second)}, // 1: amount up: 10 of 20 counted
			{t5, opTake, 10, ok(20, 0, 15*time.Second)}, // 2
		}},
		phase{Params{Amount: 15, Period: 10 * time.Second}, []step{
			{t15, opPeek, 0, ok(15, 5, 5*time.Second)},                       // 3: amount down: 20·5/10 carried of 15
			{t15, opTake, 6, no(15, 5, 500*time.Millisecond, 5*time.Second)}, // 4: once 9 are carried
			{t15, opTake, 16, unfit(15, 5, 5*time.Second)},                   // 5
			{t15, opTake, 5, ok(15, 0, 15*time.Second)},                      // 6
		}},
	)
}
