package govern

// Crossed reports whether a counter going from before to after passes the
// posture threshold th (a fraction of amount, seed 002's [0,1]) upward: it
// was below th·amount and is at or above it now. A threshold of 0 is
// passed by the first use (0 → more). The gateway and the accountant raise
// their alerts by it, so they agree on when an alert fires.
func Crossed(before, after, amount int64, th float64) bool {
	if amount <= 0 || th < 0 {
		return false
	}
	if th == 0 {
		return before <= 0 && after > 0
	}
	x := th * float64(amount)
	return float64(before) < x && float64(after) >= x
}
