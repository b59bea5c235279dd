package govern

import (
	"slices"
	"strconv"

	"github.com/tokentriage/tokentriage/shared/config"
)

// Warnings are what a plan holds that loads and runs, as seed 002 has it,
// but does not do what it seems to say: a burst on a limit that reads
// none, an override ceiling below the limit's own amount. validate prints
// them with their config paths; the gateway runs the plan as written.
func (p *Plan) Warnings() []Problem {
	var out []Problem
	limits := slices.Clone(p.Limits)
	slices.SortFunc(limits, func(a, b *Limit) int { return a.Index - b.Index })
	for _, l := range limits {
		if p.Source != nil && l.Index < len(p.Source.Limits) {
			if src := p.Source.Limits[l.Index]; src.Burst != nil && l.Type != RPM && l.Type != TPM {
				out = append(out, Problem{Path: l.Path + ".burst", Limit: l.ID, Message: burstUnread(l.Type)})
			}
		}
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

// burstUnread says why burst changes nothing on a limit of type t.
func burstUnread(t Type) string {
	switch t {
	case Concurrency:
		return "burst is read by rpm and tpm only (how many units a drained window absorbs at once); a concurrency limit holds at most amount calls at once whatever burst says: remove burst"
	}
	return "burst is read by rpm and tpm only (how many units a drained window absorbs at once); a " + t.String() +
		" limit is settled per calendar period and loads with burst, as seed 002 has it, but reads none: remove burst"
}
