// Package rate owns the four rate algorithms as pure functions of (state,
// now, cost, amount, period, burst): gcra, fixed_window, sliding_window and
// token_bucket. A State is small and encodes to a fixed number of bytes so
// the filter can keep it in a shared-data cell and update it by
// compare-and-swap.
//
// Take asks a cell for a cost and returns the decision with the cell to
// store (a refusal leaves the cell as it was); Peek is a cost-0 probe; Adjust
// is an unconditional signed debit or credit, for tpm reconcile. Time is
// always a parameter.
//
//   - gcra: a drained cell admits burst (default amount) at once, then one
//     unit per emission interval period/amount. The cell is kept in the
//     leaky-bucket form of GCRA: the units in use, draining at amount per
//     period, and a cost fits while in use + cost ≤ burst.
//   - token_bucket: a bucket of burst tokens (default amount), full when
//     fresh, refilled continuously at amount per period. The cell keeps the
//     tokens taken, so it decides as gcra does; the two differ only for a
//     clock behind the cell's (token_bucket then waits for it to catch up).
//   - fixed_window: at most amount per epoch-aligned window of one period.
//   - sliding_window: the current window plus the previous window weighted
//     by the share of it still inside one period back from now, rounded up.
//
// A State records usage and no Params, so one cell may be stepped with
// Params whose amount or burst differ from the last step's: that is a
// limit edited by a reload, which keeps its counter and the usage it has
// accumulated (seed 004). Every algorithm keeps what the cell has in use
// across the edit and judges it against the new numbers: 3 of 3 in use
// reads as 3 of 10 after the amount becomes 10. A gcra or token_bucket
// cell drains at the amount it is read with, from the instant of its last
// write on. The period is part of a counter's identity and must not change
// under a cell.
//
// The window algorithms count at most MaxWindowCount (65,535) per window.
// All arithmetic is exact integer arithmetic (128-bit products where
// needed), so results never drift, and every operation saturates rather
// than overflows: no input panics.
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
