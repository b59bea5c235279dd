package pricing

import (
	"math"
	"math/big"
	"testing"
	"testing/quick"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// TestPerMillionAgainstBig checks the 128-bit arithmetic against math/big.
func TestPerMillionAgainstBig(t *testing.T) {
	f := func(a, b, c, ra, rb, rc uint32, scale uint8) bool {
		ts := []Term{
			{uint64(a) << (scale % 20), uint64(ra) * 1000},
			{uint64(b), uint64(rb) << (scale % 16)},
			{uint64(c), uint64(rc)},
		}
		sum := new(big.Int)
		for _, t := range ts {
			sum.Add(sum, new(big.Int).Mul(new(big.Int).SetUint64(t.Tokens), new(big.Int).SetUint64(t.Rate)))
		}
		sum.Add(sum, big.NewInt(500_000))
		sum.Quo(sum, big.NewInt(1_000_000))
		want := int64(math.MaxInt64)
		if sum.IsInt64() {
			want = sum.Int64()
		}
		return PerMillion(ts...) == want
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 5000}); err != nil {
		t.Error(err)
	}
}

// TestLookupRules: exact names, date suffixes, -latest and provider
// prefixes, case ignored; nothing else matches.
func TestLookupRules(t *testing.T) {
	known := map[string]int{"gpt-4o-mini": 1, "claude-3-5-haiku": 2, "o1": 3}
	exact := func(n string) (int, bool) { v, ok := known[n]; return v, ok }
	for name, want := range map[string]int{
		"gpt-4o-mini": 1, "GPT-4o-Mini ": 1, "gpt-4o-mini-2024-07-18": 1, "gpt-4o-mini-latest": 1,
		"openai/gpt-4o-mini": 1, "claude-3-5-haiku-20241022": 2, "o1": 3,
		"gpt-4o-mini-2024-07": 0, "gpt-4o-mini-202407": 0, "gpt-4o": 0, "": 0, "x/": 0, "o1-2024-12-17": 3,
	} {
		got, ok := Lookup(name, exact)
		if (want == 0) == ok || got != want {
			t.Errorf("Lookup(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
}

// TestCost: cached input at its rate (or the input rate), reasoning not
// added again, negatives as zero, one rounding.
func TestCost(t *testing.T) {
	r := Rates{Input: 2_500_000_000, Output: 10_000_000_000, Cached: 1_250_000_000}
	for _, c := range []struct {
		u    ledger.Usage
		want int64
	}{
		{ledger.Usage{Input: 8, Output: 20}, 8*2500 + 20*10000},
		{ledger.Usage{Input: 100, CachedInput: 40, Output: 0}, 60*2500 + 40*1250},
		{ledger.Usage{Input: 1, Output: 5, Reasoning: 3}, 2500 + 5*10000},
		{ledger.Usage{Input: -5, Output: -1}, 0},
	} {
		if got := Cost(r, c.u); got != c.want {
			t.Errorf("Cost(%+v) = %d, want %d", c.u, got, c.want)
		}
	}
	if got := Cost(Rates{Input: 1, Output: 1}, ledger.Usage{Input: 1, CachedInput: 1}); got != 0 {
		t.Errorf("cached at the input rate, rounded: %d", got)
	}
	// A cached rate of 0 is a free prompt cache.
	free := Rates{Input: 2_000_000_000, Output: 4_000_000_000}
	if got, want := Cost(free, ledger.Usage{Input: 200, CachedInput: 100, Output: 10}), int64(100*2000+10*4000); got != want {
		t.Errorf("free cache: Cost = %d, want %d", got, want)
	}
}
