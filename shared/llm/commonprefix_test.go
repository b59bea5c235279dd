package llm

import (
	"math/rand"
	"testing"
)

// TestCommonPrefix holds commonPrefix to a byte-by-byte comparison for
// every length up to 40 and every place of the first difference.
func TestCommonPrefix(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for n := 0; n <= 40; n++ {
		for m := 0; m <= 40; m++ {
			a := make([]byte, n)
			rng.Read(a)
			for d := 0; d <= min(n, m); d++ {
				b := make([]byte, m)
				rng.Read(b)
				copy(b, a[:d])
				want := 0
				for want < min(n, m) && a[want] == b[want] {
					want++
				}
				if got := commonPrefix(a, b); got != want {
					t.Fatalf("commonPrefix(%x, %x) = %d, want %d", a, b, got, want)
				}
			}
		}
	}
}
