package calendar

import (
	"math"
	"testing"
	"time"
)

// TestSeedSlidingRule is seed 003's example with day buckets: 2,000 a
// window; the current bucket holds 500 and the bucket a window back 1,200;
// with two thirds of the current bucket elapsed, 400 carries over.
func TestSeedSlidingRule(t *testing.T) {
	r := Rolling{Days: 1}
	at := time.Date(2026, 8, 9, 16, 0, 0, 0, time.UTC) // 2/3 of the day
	if got := r.Count([]int64{1200, 500}, at); got != 900 {
		t.Errorf("count %d, want 900", got)
	}
	// 2,000: 1,100 left.
	if got := r.ResetsAt([]int64{1200, 500}, at, 2000); !got.Equal(at) {
		t.Errorf("resets %s; under the amount already", got)
	}
	// At 800 the window is over until 900 - share < 800: share ≤ 299,
	// 1200 × left/24h ≤ 299 → left ≤ 5h58m48s → 18:01:12.
	want := time.Date(2026, 8, 9, 18, 1, 12, 0, time.UTC)
	if got := r.ResetsAt([]int64{1200, 500}, at, 800); !got.Equal(want) {
		t.Errorf("resets %s, want %s", got, want)
	}
	if got := r.Count([]int64{1200, 500}, want); got != 799 {
		t.Errorf("count at the reset %d, want 799", got)
	}
	if got := r.Count([]int64{1200, 500}, want.Add(-time.Second)); got < 800 {
		t.Errorf("count a second before the reset %d, want 800 or more", got)
	}
}

func TestRollingWindow(t *testing.T) {
	berlin, _ := LoadZone("Europe/Berlin")
	r := Rolling{Days: 30, Loc: berlin}
	at := time.Date(2026, 8, 9, 20, 44, 50, 0, time.UTC) // 22:44:50 in Berlin
	starts := r.BucketStarts(at)
	if len(starts) != 31 {
		t.Fatalf("%d buckets", len(starts))
	}
	if got := starts[30].Format(time.RFC3339); got != "2026-08-08T22:00:00Z" {
		t.Errorf("current bucket starts %s", got)
	}
	if got := starts[0].Format(time.RFC3339); got != "2026-07-09T22:00:00Z" {
		t.Errorf("oldest bucket starts %s", got)
	}
	b := make([]int64, 31)
	for i := range b {
		b[i] = 10
	}
	// 30 full buckets and the oldest's share: 1h15m10s of 24h left.
	if got := r.Count(b, at); got != 300+1 {
		t.Errorf("count %d", got)
	}
	// Under 250: five days on (the oldest bucket gone at Berlin midnight,
	// then one a day) 250 are left in full buckets and 10 sliding out; the
	// count is 249 once 9/10 of that last 10 has slid, 2h24m into the
	// Berlin day.
	want := time.Date(2026, 8, 15, 0, 24, 0, 0, time.UTC)
	got := r.ResetsAt(b, at, 250)
	if !got.Equal(want) {
		t.Errorf("resets %s, want %s", got, want)
	}
	if r.ResetsAt(b, at, 0) != (time.Time{}) {
		t.Error("a zero amount resets at some time")
	}
}

func TestShare(t *testing.T) {
	for _, c := range []struct {
		v            int64
		left, length time.Duration
		want         int64
	}{
		{1200, 20 * time.Minute, time.Hour, 400},
		{1200, 20*time.Minute + 1, time.Hour, 401},
		{0, time.Hour, time.Hour, 0},
		{5, 0, time.Hour, 0},
		{5, 2 * time.Hour, time.Hour, 5},
		{math.MaxInt64, 23 * time.Hour, 24 * time.Hour, int64(math.Ceil(float64(math.MaxInt64) * 23 / 24))},
	} {
		if got := Share(c.v, c.left, c.length); got != c.want && !(c.v == math.MaxInt64 && got > c.want-1024 && got < c.want+1024) {
			t.Errorf("Share(%d, %s, %s) = %d, want %d", c.v, c.left, c.length, got, c.want)
		}
	}
}
