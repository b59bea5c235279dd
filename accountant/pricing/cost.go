package pricing

import (
	"github.com/tokentriage/tokentriage/shared/ledger"
	shared "github.com/tokentriage/tokentriage/shared/pricing"
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
	return Cost{Nanos: shared.Cost(m.Rates, u), Model: m.Name}
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
	return c.Price(r.Sent(), r.Usage)
}
