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

// String returns the algorithm's config spelling: gcra, fixed_window,
// sliding_window or token_bucket; "unknown" for any other value.
func (a Algorithm) String() string {
	switch a {
	case GCRA:
		return "gcra"
	case FixedWindow:
		return "fixed_window"
	case SlidingWindow:
		return "sliding_window"
	case TokenBucket:
		return "token_bucket"
	}
	return "unknown"
}

// ParseAlgorithm returns the algorithm spelled s in config (gcra,
// fixed_window, sliding_window, token_bucket), and false for anything else.
// The empty string is not an algorithm: the default (gcra) is the caller's
// to apply.
func ParseAlgorithm(s string) (Algorithm, bool) {
	switch s {
	case "gcra":
		return GCRA, true
	case "fixed_window":
		return FixedWindow, true
	case "sliding_window":
		return SlidingWindow, true
	case "token_bucket":
		return TokenBucket, true
	}
	return 0, false
}

// MaxWindowCount is the most a fixed_window or sliding_window cell counts
// per window: its counters are 16 bits wide, so an amount above it is a
// compile error and Take treats a larger amount as this one.
const MaxWindowCount = 65535
