package govern

import (
	"strings"

	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// The knobs of issue-21 policies: time zones, metric, fit, fallback and
// the per-value bound (max_distinct).

// DefaultMinOutput is the least output a fitted call is let through with
// when a limit sets no min_output.
const DefaultMinOutput = 256

// Defaults of max_distinct, by the per-value dim a limit counts: a model
// name is one of a catalog of hundreds; a SaaS serves customers by the
// hundred thousand; tags label jobs and features.
const (
	DefaultMaxDistinctModel    = 1_000
	DefaultMaxDistinctCustomer = 100_000
	DefaultMaxDistinctTag      = 1_000
	// MaxMaxDistinct bounds what max_distinct may be set to.
	MaxMaxDistinct = 1_000_000
)

// Gate is where the limit is evaluated: rpm and concurrency at Gate1,
// unless narrowed by a model, provider, customer or tag, which the body
// names (Gate2, with the other four types).
func (l *Limit) Gate() Gate {
	if l.gate != 0 {
		return l.gate
	}
	return l.Type.Gate()
}

// PerValue reports whether the limit keeps one counter per value of a
// dim (a model, customer or tag pattern), bounded by MaxDistinct.
func (l *Limit) PerValue() bool { return l.glob || l.customerGlob || l.tagGlob }

// PerTag reports whether the limit keeps one counter per tag (a match.tag
// pattern with metacharacters).
func (l *Limit) PerTag() bool { return l.tagGlob }

// MetricName is the config spelling of a metric: total, input or output.
func MetricName(m Metric) string {
	switch m {
	case MetricInput:
		return "input"
	case MetricOutput:
		return "output"
	}
	return "total"
}

// timezone validates governance.timezone: an IANA zone name.
func (c *compiler) timezone(name string) {
	if name == "" || c.unbuilt("governance.timezone", "timezone") {
		return
	}
	if _, err := calendar.LoadZone(name); err != nil {
		c.at("governance.timezone", "%v", err)
		return
	}
	c.defaultZone = name
}

// zone sets the time zone of a spend or quota limit's period: its own
// timezone:, else governance.timezone, else UTC.
func (c *compiler) zone(l *Limit, p, name string) {
	if name != "" && l.Type.Class() != LedgerSettled {
		c.at(p+".timezone", "not accepted on %s (a window has no calendar boundaries to place in a time zone); remove timezone:", l.Type)
		return
	}
	if l.Type.Class() != LedgerSettled || !l.Period.Counted() {
		return
	}
	if name == "" {
		name = c.defaultZone
	}
	if name == "UTC" {
		name = ""
	}
	if name != "" && c.unbuilt(p+".timezone", "timezone") {
		return
	}
	loc, err := calendar.LoadZone(name)
	if err != nil {
		c.at(p+".timezone", "%v", err)
		return
	}
	l.Period.Zone, l.Period.loc = name, loc
	if name == "" {
		l.Period.loc = nil
	}
}

func (c *compiler) metric(l *Limit, p, s string) {
	switch s {
	case "", "total":
		return
	case "input", "output":
		if c.unbuilt(p+".metric", "metric") {
			return
		}
	default:
		c.at(p+".metric", "unknown metric %q (known: input, output, total: what a token counts)", s)
		return
	}
	if l.Type != QuotaTokens && l.Type != TPM {
		c.at(p+".metric", "not accepted on %s (metric says which tokens a token limit counts: quota_tokens and tpm); remove metric:", l.Type)
		return
	}
	if s == "input" {
		l.Metric = MetricInput
	} else {
		l.Metric = MetricOutput
	}
}

// fit reads fit: and min_output:.
func (c *compiler) fit(l *Limit, p string, cl *config.Limit) {
	if cl.Fit && c.unbuilt(p+".fit", "fit") {
		return
	}
	if cl.MinOutput != nil && !cl.Fit {
		c.at(p+".min_output", "read only with fit: true (it is the least output a fitted call is let through with); set fit: true, or remove min_output:")
	}
	if !cl.Fit {
		return
	}
	switch {
	case l.Type == BudgetUSD && !cl.Reserve:
		c.at(p+".fit", "on budget_usd, fitting a call's output to what is left needs reserve: true (the budget's spend is otherwise known only after the call); set reserve: true")
		return
	case l.Type != BudgetUSD && l.Type != TPM && l.Type != QuotaTokens:
		c.at(p+".fit", "not accepted on %s (fit lowers a call's output maximum to what a token or dollar limit still holds: tpm, quota_tokens, budget_usd with reserve: true); remove fit:", l.Type)
		return
	case l.Metric == MetricInput:
		c.at(p+".fit", "metric: input counts no output, so lowering a call's output maximum frees nothing; remove fit:, or count output or total")
		return
	}
	l.Fit, l.MinOutput = true, DefaultMinOutput
	if cl.MinOutput != nil {
		switch n := *cl.MinOutput; {
		case n < 1 || n > ReserveCap:
			c.at(p+".min_output", "must be from 1 to %d, got %d (the default is %d)", ReserveCap, n, DefaultMinOutput)
		default:
			l.MinOutput = n
		}
	}
}

// fallback reads fallback: { model: ... }.
func (c *compiler) fallback(l *Limit, p string, f *config.Fallback) {
	if f == nil || c.unbuilt(p+".fallback", "fallback") {
		return
	}
	at := p + ".fallback.model"
	switch {
	case l.Type.Class() != LedgerSettled:
		c.at(p+".fallback", "not accepted on %s (a fallback serves with another model what a budget or quota would refuse: budget_usd, quota_tokens, quota_requests); remove fallback:", l.Type)
		return
	case f.Model == "":
		c.at(at, `required: the model to serve instead, e.g. fallback: { model: "gpt-4o-mini" }`)
		return
	case strings.ContainsAny(f.Model, `*?[\`):
		c.at(at, "%q is a pattern; a fallback names one model", f.Model)
		return
	}
	if msg := ModelID.Check(f.Model); msg != "" {
		c.at(at, "%s", msg)
		return
	}
	if !l.glob && l.Match.Model != "" && l.Match.Model == f.Model {
		c.at(at, "%q is the model this limit counts, so a request it refuses would be refused again; name another model", f.Model)
		return
	}
	l.Fallback = f.Model
}

// maxDistinct reads max_distinct, or sets its default for a limit that
// keeps one counter per value.
func (c *compiler) maxDistinct(l *Limit, p string, n *int64) {
	if !l.PerValue() {
		if n != nil {
			c.at(p+".max_distinct", "read only on a limit that keeps one counter per value (a match.model, match.customer or match.tag pattern such as \"*\"); this one keeps one counter; remove max_distinct:")
		}
		return
	}
	if n != nil && c.unbuilt(p+".max_distinct", "max_distinct") {
		return
	}
	switch {
	case n == nil:
		l.MaxDistinct = DefaultMaxDistinctModel
		if l.tagGlob {
			l.MaxDistinct = DefaultMaxDistinctTag
		}
		if l.customerGlob {
			l.MaxDistinct = DefaultMaxDistinctCustomer
		}
	case *n < 1 || *n > MaxMaxDistinct:
		c.at(p+".max_distinct", "must be from 1 to %d, got %d", MaxMaxDistinct, *n)
	default:
		l.MaxDistinct, l.maxDistinctSet = *n, true
	}
}

// Extra is what /tt/v1/me and the limits API say of l beyond seed 002 and
// seed 004's members: each member only when l sets it.
func (l *Limit) Extra() wire.LimitExtra {
	x := wire.LimitExtra{Timezone: l.Period.Zone, Fallback: l.Fallback, MaxDistinct: 0}
	if l.Type.Gate() == Gate1 && l.Gate() == Gate2 {
		x.Evaluated = "request_body"
	}
	if l.Metric != MetricTotal {
		x.Metric = MetricName(l.Metric)
	}
	if l.Fit {
		x.Fit, x.MinOutput = true, l.MinOutput
	}
	return x
}

// DisclosedMaxDistinct is l's bound as the limits API and /tt/v1/me show
// it: when max_distinct was written, or the limit counts per customer or
// tag; 0 for a model pattern's default, so that plans of earlier releases
// read as they did (its overflow is disclosed when it happens).
func (l *Limit) DisclosedMaxDistinct() int64 {
	if l.maxDistinctSet || l.customerGlob || l.tagGlob {
		return l.MaxDistinct
	}
	return 0
}

// pending lists the keys this build decodes and checks but does not yet
// enforce end to end: a plan naming one is refused at compile rather than
// armed with a key that would change nothing.
var pending = map[string]string{}

// unbuilt refuses a key listed in pending.
func (c *compiler) unbuilt(path, key string) bool {
	if why, ok := pending[key]; ok {
		c.at(path, "%s is not enforced by this build yet (%s)", key, why)
		return true
	}
	return false
}
