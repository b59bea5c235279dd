package pricing

import (
	"math"
	"math/bits"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// Cost is the priced cost of one row's usage.
type Cost struct {
	Nanos    int64 // nanodollars, rounded half up once per row
	Unpriced bool  // the model is not in the catalog; Nanos is 0 and means nothing
	Model    string
}

// Price prices usage for the named model. The name is the model the
// provider served when the row has one, otherwise the model requested (see
// PriceRow). Usage figures are read as the providers report them:
//
//   - Input counts every prompt token, CachedInput the part of them served
//     from the prompt cache (billed at the cached rate, the rest at the input
//     rate). A CachedInput above Input is read as reported apart from Input.
//   - Output counts every generated token, reasoning included, as OpenAI's
//     completion_tokens and Anthropic's output_tokens do; Reasoning is a
//     breakdown of it and is not added again. A Reasoning above Output can
//     only have been reported apart, and is then billed as output too.
//
// Negative figures count as zero.
func (c *Catalog) Price(model string, u ledger.Usage) Cost {
	m, ok := c.Lookup(model)
	if !ok {
		return Cost{Unpriced: true}
	}
	in, cached, out := max(u.Input, 0), max(u.CachedInput, 0), max(u.Output, 0)
	uncached := in - cached
	if uncached < 0 { // cached reported apart from input
		uncached = in
	}
	if r := max(u.Reasoning, 0); r > out {
		out += r
	}
	cachedRate := m.Rates.Cached
	if cachedRate == 0 {
		cachedRate = m.Rates.Input
	}
	return Cost{Nanos: perMillion(
		term{uint64(uncached), uint64(max(m.Rates.Input, 0))},
		term{uint64(cached), uint64(max(cachedRate, 0))},
		term{uint64(out), uint64(max(m.Rates.Output, 0))},
	), Model: m.Name}
}

// PriceRow prices a ledger row: by the served model when the provider named
// one, else by the requested model.
func (c *Catalog) PriceRow(r *ledger.Row) Cost {
	name := r.Served
	if name != "" {
		if _, ok := c.Lookup(name); ok {
			return c.Price(name, r.Usage)
		}
	}
	return c.Price(r.Model, r.Usage)
}

type term struct{ tokens, rate uint64 }

// perMillion returns round_half_up(Σ tokens×rate / 1e6) in 128-bit integer
// arithmetic, saturating at MaxInt64 (a cost no real row reaches).
func perMillion(ts ...term) int64 {
	var hi, lo uint64
	for _, t := range ts {
		h, l := bits.Mul64(t.tokens, t.rate)
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
