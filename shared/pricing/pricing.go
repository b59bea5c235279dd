// Package pricing holds what the accountant and the filter must compute
// alike: how a model name finds its entry in a price list, and what a row's
// usage costs at a model's rates, in integer nanodollars rounded once. The
// accountant prices ledger rows with it; the filter, in budget reserve mode,
// bounds and settles a call's cost with the same arithmetic.
package pricing

import (
	"math"
	"math/bits"
	"strings"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// Rates are the prices of one model in nanodollars per million tokens.
type Rates struct {
	Input  int64 // uncached input (prompt) tokens
	Output int64 // output tokens, reasoning included
	// Cached is the rate of input tokens served from the provider's prompt
	// cache, 0 when they are free. A catalog gives a model that states no
	// cached rate its Input here, so the rate is always the one billed.
	Cached int64
}

// Lookup finds the entry a requested or served model name prices as, given
// exact, which answers for a lowercase name or alias. It tries, in order:
// the exact name; the name with a date suffix removed
// (gpt-4o-mini-2024-07-18, claude-3-5-haiku-20241022); the name with
// "-latest" removed; each of those again after a "provider/" prefix is
// dropped. Case and surrounding space are ignored.
func Lookup[T any](name string, exact func(string) (T, bool)) (T, bool) {
	var zero T
	if name == "" {
		return zero, false
	}
	n := strings.ToLower(strings.TrimSpace(name))
	if m, ok := lookup(n, exact); ok {
		return m, true
	}
	if i := strings.LastIndexByte(n, '/'); i >= 0 && i+1 < len(n) {
		return lookup(n[i+1:], exact)
	}
	return zero, false
}

func lookup[T any](n string, exact func(string) (T, bool)) (T, bool) {
	if m, ok := exact(n); ok {
		return m, true
	}
	if base, ok := cutDateSuffix(n); ok {
		if m, ok := exact(base); ok {
			return m, true
		}
	}
	if base, ok := strings.CutSuffix(n, "-latest"); ok {
		if m, ok := exact(base); ok {
			return m, true
		}
	}
	var zero T
	return zero, false
}

// cutDateSuffix removes a trailing -YYYY-MM-DD or -YYYYMMDD.
func cutDateSuffix(n string) (string, bool) {
	digits := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
		return true
	}
	if l := len(n); l > 11 && n[l-11] == '-' && n[l-6] == '-' && n[l-3] == '-' &&
		digits(n[l-10:l-6]) && digits(n[l-5:l-3]) && digits(n[l-2:]) {
		return n[:l-11], true
	}
	if l := len(n); l > 9 && n[l-9] == '-' && digits(n[l-8:]) {
		return n[:l-9], true
	}
	return n, false
}

// Cost is what usage costs at rates, in nanodollars, rounded half up once.
// Usage figures are read as the providers report them:
//
//   - Input counts every prompt token, CachedInput the part of them served
//     from the prompt cache (billed at r.Cached, the rest at the input rate).
//     A CachedInput above Input is read as reported apart from Input.
//   - Output counts every generated token, reasoning included, as OpenAI's
//     completion_tokens and Anthropic's output_tokens do; Reasoning is a
//     breakdown of it and is not added again. A Reasoning above Output can
//     only have been reported apart, and is then billed as output too.
//
// Negative figures count as zero.
func Cost(r Rates, u ledger.Usage) int64 {
	in, cached, out := max(u.Input, 0), max(u.CachedInput, 0), max(u.Output, 0)
	uncached := in - cached
	if uncached < 0 { // cached reported apart from input
		uncached = in
	}
	if re := max(u.Reasoning, 0); re > out {
		out += re
	}
	return PerMillion(
		Term{uint64(uncached), uint64(max(r.Input, 0))},
		Term{uint64(cached), uint64(max(r.Cached, 0))},
		Term{uint64(out), uint64(max(r.Output, 0))},
	)
}

// Term is a token count and its rate per million tokens.
type Term struct{ Tokens, Rate uint64 }

// PerMillion returns round_half_up(Σ tokens×rate / 1e6) in 128-bit integer
// arithmetic, saturating at MaxInt64 (a cost no real row reaches).
func PerMillion(ts ...Term) int64 {
	var hi, lo uint64
	for _, t := range ts {
		h, l := bits.Mul64(t.Tokens, t.Rate)
		var carry uint64
		lo, carry = bits.Add64(lo, l, 0)
		hi, _ = bits.Add64(hi, h, carry)
	}
	var carry uint64
	lo, carry = bits.Add64(lo, 500_000, 0) // half of the divisor: round half up
	hi += carry
	if hi >= 1_000_000 { // the quotient would not fit in 64 bits
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, 1_000_000)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}
