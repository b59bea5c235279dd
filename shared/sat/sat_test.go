package sat

import (
	"math"
	"math/big"
	"testing"
	"testing/quick"
)

// reference is a + b computed exactly, then clamped to the int64 bounds.
func reference(a, b int64) int64 {
	s := new(big.Int).Add(big.NewInt(a), big.NewInt(b))
	switch {
	case s.Cmp(big.NewInt(math.MaxInt64)) > 0:
		return math.MaxInt64
	case s.Cmp(big.NewInt(math.MinInt64)) < 0:
		return math.MinInt64
	}
	return s.Int64()
}

func TestAddAtTheBounds(t *testing.T) {
	const max, min = math.MaxInt64, math.MinInt64
	for _, c := range []struct{ a, b, want int64 }{
		{1, 2, 3},
		{0, 0, 0},
		{max, 0, max},
		{max, 1, max},
		{max, max, max},
		{max - 1, 1, max},
		{1, max, max},
		{min, 0, min},
		{min, -1, min},
		{min, min, min},
		{min, max, -1},
		{-1, min, min},
		{max, -1, max - 1},
		{-5, 3, -2},
	} {
		if got := Add(c.a, c.b); got != c.want {
			t.Errorf("Add(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestAddIsTheClampedSum(t *testing.T) {
	f := func(a, b int64) bool { return Add(a, b) == reference(a, b) }
	if err := quick.Check(f, &quick.Config{MaxCount: 100000}); err != nil {
		t.Error(err)
	}
	// Near the bounds, where quick's uniform draws seldom go.
	g := func(a, b uint16, neg bool) bool {
		x, y := int64(math.MaxInt64-int64(a)), int64(b)
		if neg {
			x, y = math.MinInt64+int64(a), -y
		}
		return Add(x, y) == reference(x, y) && Add(y, x) == reference(y, x)
	}
	if err := quick.Check(g, nil); err != nil {
		t.Error(err)
	}
}
