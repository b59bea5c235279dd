// Package rate owns the four rate algorithms as pure functions of (state,
// now, cost, amount, period, burst): gcra, fixed_window, sliding_window and
// token_bucket. A State is small and encodes to a fixed number of bytes so
// the filter can keep it in a shared-data cell and update it by
// compare-and-swap.
package rate

// Algorithm is a rate algorithm.
type Algorithm uint8

const (
	GCRA Algorithm = iota + 1
	FixedWindow
	SlidingWindow
	TokenBucket
)
