// Package sat is saturating int64 arithmetic for counters and amounts: a
// row reporting absurd usage (a filter bug, a provider's garbage) pins a
// counter at a bound instead of wrapping it to the other sign, which would
// read as spend far under every limit.
package sat

import "math"

// Add is a + b, saturating at math.MaxInt64 and math.MinInt64. It is on
// every counter's path, so it has one branch, taken only on overflow (a
// and b of one sign, the sum of the other).
func Add(a, b int64) int64 {
	s := a + b
	if (a^s)&(b^s) < 0 {
		if a < 0 {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	return s
}
