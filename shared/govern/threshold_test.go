package govern

import "testing"

// TestCrossed: a threshold is crossed when usage rises from below its
// fraction of the amount to at or above it; a threshold of 0 is crossed by
// the first use.
func TestCrossed(t *testing.T) {
	for i, c := range []struct {
		before, after, amount int64
		th                    float64
		want                  bool
	}{
		{0, 5, 10, 0.5, true},
		{5, 6, 10, 0.5, false},
		{4, 5, 10, 0.5, true},
		{9, 10, 10, 1, true},
		{0, 1, 10, 0, true},
		{1, 2, 10, 0, false},
		{0, 0, 10, 0, false},
		{0, 5, 0, 0.5, false},
		{0, 5, 10, -0.5, false},
	} {
		if got := Crossed(c.before, c.after, c.amount, c.th); got != c.want {
			t.Errorf("step %d: Crossed(%d → %d of %d, %v) = %v, want %v", i, c.before, c.after, c.amount, c.th, got, c.want)
		}
	}
}
