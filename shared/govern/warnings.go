package govern

import (
	"slices"
	"strconv"

	"github.com/tokentriage/tokentriage/shared/config"
)

// Warnings are what a plan holds that loads and runs, as seed 002 has it,
// but does not do what it seems to say: an override ceiling below the
// limit's own amount. validate prints
// them with their config paths; the gateway runs the plan as written.
func (p *Plan) Warnings() []Problem {
	var out []Problem
	limits := slices.Clone(p.Limits)
	slices.SortFunc(limits, func(a, b *Limit) int { return a.Index - b.Index })
	for _, l := range limits {
		if l.OverrideAllow && l.OverrideMax > 0 && l.OverrideMax < l.Amount {
			field, ceiling, amount := ".override.max_amount", strconv.FormatInt(l.OverrideMax, 10), "amount "+strconv.FormatInt(l.Amount, 10)
			if l.Type == BudgetUSD {
				field, ceiling, amount = ".override.max_amount_usd", config.USD{Nanos: l.OverrideMax}.String(), "amount_usd "+config.USD{Nanos: l.Amount}.String()
			}
			out = append(out, Problem{Path: l.Path + field, Limit: l.ID, Message: "the ceiling " + ceiling + " is below the limit's own " + amount +
				": every node runs at the amount, no override may raise a node's cap, and one may lower it only to " + ceiling +
				" or less (the ceiling caps overrides, not the amount); raise the ceiling to at least the amount, or lower the amount"})
		}
	}
	return out
}
