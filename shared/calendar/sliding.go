package calendar

import (
	"math"
	"math/bits"
	"time"
)

// Rolling is a rolling window of Days whole days (period: 30d), counted
// in day buckets of the zone Loc by seed 003's sliding rule: the window
// counts the current day's bucket, the Days-1 full days before it, and the
// share of the bucket Days days back that is still inside the window,
// weighted by how much of the current day is left, rounded up. A bucket is
// the zone's calendar day (23 or 25 hours across a DST change).
type Rolling struct {
	Days int
	Loc  *time.Location // nil is UTC
}

// Bucket returns the bounds of the day bucket holding t, in UTC.
func (r Rolling) Bucket(t time.Time) (start, end time.Time) {
	return StartIn(Day, t, r.Loc), EndIn(Day, t, r.Loc)
}

// BucketStarts returns the starts of the Days+1 buckets the window holding
// t reads, oldest first: the partly counted one, then the full ones, the
// current one last.
func (r Rolling) BucketStarts(t time.Time) []time.Time {
	loc := r.Loc
	if loc == nil {
		loc = time.UTC
	}
	l := StartIn(Day, t, loc).In(loc)
	y, m, d := l.Date()
	out := make([]time.Time, r.Days+1)
	for i := range out {
		out[i] = time.Date(y, m, d-r.Days+i, 0, 0, 0, 0, loc).UTC()
	}
	return out
}

// Count is the window's count at t. buckets are the values of the buckets
// BucketStarts(t) names, in that order (missing ones zero).
func (r Rolling) Count(buckets []int64, t time.Time) int64 {
	if len(buckets) == 0 {
		return 0
	}
	full := int64(0)
	for _, v := range buckets[1:] {
		full = addSat(full, v)
	}
	start, end := r.Bucket(t)
	return addSat(full, Share(buckets[0], end.Sub(t), end.Sub(start)))
}

// Share is ceil(v × left / length): the part of the oldest bucket, v, a
// sliding window still holds when left of length of the current bucket
// remains. It is exact in integers for any v and durations.
func Share(v int64, left, length time.Duration) int64 {
	if v <= 0 || left <= 0 || length <= 0 {
		return 0
	}
	if left >= length {
		return v
	}
	hi, lo := bits.Mul64(uint64(v), uint64(left))
	q, rem := bits.Div64(hi, lo, uint64(length))
	if rem != 0 {
		q++
	}
	return int64(q)
}

// ResetsAt is when the window, left to itself, first counts less than
// amount: now when it already does, and the zero time when no bucket it
// holds leaves it within Days+1 days (the amount is not positive).
// buckets are as for Count.
func (r Rolling) ResetsAt(buckets []int64, t time.Time, amount int64) time.Time {
	if amount <= 0 || len(buckets) == 0 {
		return time.Time{}
	}
	if r.Count(buckets, t) < amount {
		return t
	}
	b := append([]int64(nil), buckets...)
	start, end := r.Bucket(t)
	at := t
	for range len(b) + 1 {
		full := int64(0)
		for _, v := range b[1:] {
			full = addSat(full, v)
		}
		if full < amount {
			// Within this bucket: the oldest's share falls to
			// amount-full-1 or less once left × oldest ≤ (amount-full-1) ×
			// length.
			if b[0] <= amount-full-1 {
				return at
			}
			length := end.Sub(start)
			hi, lo := bits.Mul64(uint64(amount-full-1), uint64(length))
			left := time.Duration(0)
			if hi < uint64(b[0]) {
				q, _ := bits.Div64(hi, lo, uint64(b[0]))
				left = time.Duration(min(q, math.MaxInt64))
			}
			if when := end.Add(-left); when.After(at) {
				return when
			}
			return at
		}
		// Not within this bucket: the next one starts with the oldest gone.
		copy(b, b[1:])
		b[len(b)-1] = 0
		at = end
		start, end = r.Bucket(end)
	}
	return time.Time{}
}

func addSat(a, b int64) int64 {
	if s := a + b; (s > a) == (b > 0) {
		return s
	}
	if b > 0 {
		return math.MaxInt64
	}
	return math.MinInt64
}
