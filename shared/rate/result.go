package rate

import "time"

// Result is what one step of an algorithm decided, and what the cell looks
// like afterwards.
type Result struct {
	// Allowed reports that the cost was admitted and counted.
	Allowed bool
	// Limit is the cell's capacity: the burst for gcra and token_bucket,
	// the amount per window for fixed_window and sliding_window.
	Limit int64
	// Remaining is what a request could still take now, in [0, Limit].
	// After an admitted Take it already counts that take.
	Remaining int64
	// RetryAfter is how long until the same cost would be admitted, with
	// no other traffic in between. Zero when allowed, and zero when the
	// cost is Unfittable (no wait ever helps).
	RetryAfter time.Duration
	// ResetAfter is how long until the cell is back at full capacity (the
	// gcra or token_bucket cell fully drained, the window reset). Zero when
	// it already is.
	ResetAfter time.Duration
	// Unfittable reports that the cost exceeds Limit, so it can never be
	// admitted however long the caller waits.
	Unfittable bool
}
