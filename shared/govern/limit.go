package govern

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/llm"
	"github.com/tokentriage/tokentriage/shared/rate"
)

// limit compiles governance.limits[i]. It always returns a Limit holding
// what could be read; the problems it finds are recorded on c.
func (c *compiler) limit(i int, cl *config.Limit, tree map[string]uint8, shared *config.SharedState) *Limit {
	p := limitPath(i)
	l := &Limit{ID: cl.ID, Index: i, Path: p, OverrideMax: -1}

	switch {
	case cl.ID == "":
		c.at(p+".id", "required (it names the limit on every 429 and ledger row; charset [a-z0-9_])")
	case !charsetOK(cl.ID):
		c.at(p+".id", "%q is out of charset [a-z0-9_] (lowercase letters, digits and _)", cl.ID)
	}

	t, typeOK := ParseType(cl.Type)
	switch {
	case cl.Type == "":
		c.at(p+".type", "required (one of %s)", knownTypes())
	case !typeOK:
		hint := ""
		if cl.Type == "rps" {
			hint = "; requests per second is rpm with period: 1s"
		}
		c.at(p+".type", "unknown type %q (known: %s)%s", cl.Type, knownTypes(), hint)
	}
	l.Type = t

	c.attach(l, p, cl.Attach, tree)
	c.match(l, p, cl.Match, typeOK)
	if typeOK {
		amountOK := c.amount(l, p, cl)
		c.period(l, p, cl.Period)
		c.zone(l, p, cl.Timezone)
		c.metric(l, p, cl.Metric)
		c.fit(l, p, cl)
		c.rateKnobs(l, p, cl, amountOK, shared)
		c.override(l, p, cl.Override)
		c.fallback(l, p, cl.Fallback)
		c.maxDistinct(l, p, cl.MaxDistinct)
	}
	c.posture(l, p, cl.Posture)
	if cl.Reserve && typeOK && l.Period.Counted() && !l.Period.Classic() {
		c.at(p+".reserve", "reserve mode counts a UTC day, ISO week or month; with period %q%s write one of those in UTC (timezone: UTC on the limit, when governance.timezone names another zone), or remove reserve", cl.Period, zoneNote(l.Period.Zone))
	}
	if typeOK && l.Fallback != "" && l.Match.Model == "" && !cl.Reserve && !cl.Fit {
		c.at(p+".fallback", "limit %q counts every model in one counter, so once it refuses a request its fallback model would be refused too; narrow it to the dear model (match: { model: gpt-4o }), count each model apart (match: { model: \"*\" }), or let a cheaper call fit what is left (reserve: true on budget_usd, fit: true on quota_tokens)", cl.ID)
	}
	if typeOK && l.Period.Rolling > 0 && cl.Posture != nil && len(cl.Posture.Thresholds) > 0 {
		c.at(p+".posture.thresholds", "alert thresholds are not raised on a rolling window (%s): its count falls as the window slides, so a crossing has no period to be raised once in; use a calendar period for alerts, or remove thresholds", l.Period.String())
	}
	if cl.Reserve {
		if typeOK && t.Class() != LedgerSettled {
			c.at(p+".reserve", "%s", reserveRefusal(t))
		}
		if l.Enforce == EnforceSoft {
			c.at(p+".reserve", "reserve mode holds the cap by lowering each call's output maximum to what the limit has left, so with enforce: soft (admit on breach) calls would be cut short while some is left and then admitted whole once none is; remove reserve for a soft limit, or enforce: soft for a reserve one")
		}
		l.Reserve = true
	}
	l.period = l.Period.identity()
	if l.Metric != MetricTotal {
		l.typeField = l.Type.String() + ":" + MetricName(l.Metric)
	}
	return l
}

// reserveRefusal says why reserve: true is refused on a limit of type t:
// what the type holds at admission already.
func reserveRefusal(t Type) string {
	const head = "reserve mode is for budget_usd, quota_tokens and quota_requests (it holds a call's dearest cost against what the period has left while the call runs); "
	switch t {
	case RPM:
		return head + "rpm counts each request as it arrives, so there is nothing left to hold: remove reserve"
	case TPM:
		return head + "tpm already reserves each call's most tokens when it is admitted and hands back what it did not use when the call ends: remove reserve"
	}
	return head + "concurrency already holds a slot for each call from its admission to its end: remove reserve"
}

func (c *compiler) attach(l *Limit, p string, a config.Attach, tree map[string]uint8) {
	switch {
	case (a.Node == "") == (a.Level == ""):
		c.at(p+".attach", "must set exactly one of {node, level}")
	case a.Level != "":
		switch a.Level {
		case LevelOrg, LevelTeam, LevelUser, LevelKey:
			l.Level = a.Level
		case "global":
			c.at(p+".attach.level", `"global" instantiates no node (no tree node exists at that level), so the limit would bind nothing; write attach: { node: __global } for a fleet-wide limit`)
		default:
			c.at(p+".attach.level", "unknown level %q (known: org, team, user, key; a fleet-wide limit is attach: { node: __global })", a.Level)
		}
	case a.Node == Global:
		l.Node = Global
	default:
		if err := ValidNodeID(a.Node); err != nil {
			c.at(p+".attach.node", "%s", err)
			return
		}
		l.Node = a.Node
		if tree[a.Node] == lvNone {
			c.boot(l, p+".attach.node", "pinned node %q not in tenancy tree", a.Node)
			c.problems[len(c.problems)-1].Node = a.Node
		}
	}
}

// amount reads amount or amount_usd; it reports whether the cap is usable.
func (c *compiler) amount(l *Limit, p string, cl *config.Limit) bool {
	t := l.Type
	if t == BudgetUSD {
		if cl.Amount != nil {
			c.at(p+".amount", "not accepted on budget_usd (its cap is amount_usd, in dollars)")
		}
		switch {
		case cl.AmountUSD == nil:
			c.at(p+".amount_usd", "required on budget_usd (the cap in dollars, e.g. amount_usd: 1000)")
		case cl.AmountUSD.Nanos <= 0:
			c.at(p+".amount_usd", "must be positive, got %s (to switch a limit off, set posture: { mode: off })", cl.AmountUSD)
		default:
			l.Amount = cl.AmountUSD.Nanos
			return true
		}
		return false
	}
	if cl.AmountUSD != nil {
		c.at(p+".amount_usd", "not accepted on %s (only budget_usd counts dollars; write amount, in %s)", t, t.Unit())
	}
	switch {
	case cl.Amount == nil:
		c.at(p+".amount", "required on %s (%s)", t, amountMeaning(t))
	case *cl.Amount <= 0:
		c.at(p+".amount", "must be positive, got %d (to switch a limit off, set posture: { mode: off })", *cl.Amount)
	default:
		l.Amount = *cl.Amount
		return true
	}
	return false
}

func amountMeaning(t Type) string {
	switch t {
	case QuotaTokens:
		return "the cap as a token count, input plus output, per period"
	case QuotaRequests:
		return "the cap as a count of forwarded requests per period"
	case RPM:
		return "requests admitted per window"
	case TPM:
		return "tokens per window"
	case Concurrency:
		return "simultaneous in-flight requests"
	}
	return ""
}

func (c *compiler) period(l *Limit, p, s string) {
	t := l.Type
	pp := p + ".period"
	cal, isCal := parseCalendar(s)
	win, winErr := time.ParseDuration(s)
	switch {
	case t.Class() == LedgerSettled:
		days, isRolling, rollErr := parseRolling(s)
		switch {
		case s == "":
			c.at(pp, "required on %s (%s)", t, periodChoices)
		case isCal && (cal == calendar.Hour || cal == calendar.Quarter || cal == calendar.Year) && c.unbuilt(pp, "period"):
		case isCal:
			l.Period.Calendar = cal
		case isRolling && c.unbuilt(pp, "period"):
		case isRolling && rollErr != "":
			c.at(pp, "%s", rollErr)
		case isRolling:
			l.Period.Rolling = days
		case winErr == nil:
			c.at(pp, "%q is a rate window, but %s counts over a calendar period: write %s%s", s, t, periodChoices, windowAlternative(t))
		default:
			c.at(pp, "unknown period %q (%s)", s, periodChoices)
		}
	case t.IsRate():
		switch {
		case s == "":
			c.boot(l, pp, "%s requires a rate-class window period (e.g. 1s, 1m), not a calendar period", t)
		case isCal:
			c.at(pp, "calendar period %q on %s, which counts over a window: write a Go duration such as 1s or 1m (a per-%s cap is %s)", s, t, s, calendarAlternative(t))
		case isRollingSpelling(s):
			c.at(pp, "%q is a rolling window of days, which spend and quota limits count over; %s counts over a window written as a Go duration, such as 1m or 24h (a rolling %s cap is %s)", s, t, s, calendarAlternative(t))
		case winErr != nil:
			c.at(pp, "%q is not a window: write a Go duration such as 1s, 1m or 1h", s)
		case win <= 0:
			c.at(pp, "window %q must be positive", s)
		default:
			l.Period.Window = win
		}
	case t == Concurrency:
		switch {
		case s == "":
		case isCal:
			c.at(pp, "calendar period %q is not accepted on concurrency (a live gauge has no period); remove period:", s)
		case winErr == nil:
			c.at(pp, "a window period on concurrency limits nothing and would split the live gauge (the period is part of the counter identity); remove period:")
		default:
			c.at(pp, "%q is not accepted on concurrency (a live gauge has no period); remove period:", s)
		}
	}
}

func zoneNote(zone string) string {
	if zone == "" {
		return ""
	}
	return " in " + zone
}

// periodChoices is what a spend or quota limit's period may be.
const periodChoices = "hour, day, week, month, quarter, year, or a rolling window of days such as 7d or 30d"

// maxRollingDays bounds a rolling window: a year and a day.
const maxRollingDays = 366

// parseRolling reads a rolling window of days ("30d"): ok when s is
// spelt as one, with a problem when its count is out of range.
func parseRolling(s string) (days int, ok bool, problem string) {
	if !isRollingSpelling(s) {
		return 0, false, ""
	}
	n, err := strconv.Atoi(s[:len(s)-1])
	if err != nil || n < 1 || n > maxRollingDays {
		return 0, true, fmt.Sprintf("rolling window %q must be from 1d to %dd", s, maxRollingDays)
	}
	return n, true, ""
}

func isRollingSpelling(s string) bool {
	if len(s) < 2 || s[len(s)-1] != 'd' {
		return false
	}
	for i := 0; i < len(s)-1; i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func windowAlternative(t Type) string {
	switch t {
	case QuotaTokens:
		return " (a per-window token cap is tpm)"
	case QuotaRequests:
		return " (a per-window request cap is rpm)"
	}
	return ""
}

func calendarAlternative(t Type) string {
	if t == TPM {
		return "quota_tokens"
	}
	return "quota_requests"
}

// rateKnobs reads burst, algorithm and store.
func (c *compiler) rateKnobs(l *Limit, p string, cl *config.Limit, amountOK bool, shared *config.SharedState) {
	t := l.Type
	switch t.Class() {
	case LedgerSettled:
		if cl.Algorithm != "" {
			c.at(p+".algorithm", "not accepted on %s (spend and quota limits count a calendar period, not a rate); remove algorithm:", t)
		}
		if cl.Store != "" {
			c.at(p+".store", "not accepted on %s (spend and quota counters are folded from the ledger by the accountant, not kept in a rate store); remove store:", t)
		}
		return // burst is accepted and read by nothing (seed 002)
	case InflightLease:
		if cl.Algorithm != "" {
			c.at(p+".algorithm", "not accepted on concurrency (a concurrency limit is a live gauge with no rate algorithm); remove algorithm:")
		}
	}

	store := StoreLocal
	if cl.Store != "" {
		s, ok := parse(storeNames[:], cl.Store)
		if !ok {
			c.at(p+".store", "unknown store %q (known: local, redis, share)", cl.Store)
		}
		store = Store(s)
	}
	l.Store = store
	if t == Concurrency {
		if store == StoreRedis {
			c.at(p+".store", `"redis" is not accepted on concurrency (the gauge is replica-local); use local, or share to divide the cap across replicas`)
		}
		return
	}

	// rpm and tpm.
	alg := rate.GCRA
	if cl.Algorithm != "" {
		a, ok := parseAlgorithm(cl.Algorithm)
		if !ok {
			c.at(p+".algorithm", "unknown algorithm %q (known: gcra, fixed_window, sliding_window, token_bucket)", cl.Algorithm)
		} else {
			alg = a
		}
	}
	l.Algorithm = alg

	if store == StoreRedis && (shared == nil || shared.Redis == nil) {
		c.at(p+".store", `"redis" needs governance.shared_state.redis (the address of the Redis server)`)
	}
	if store == StoreRedis && l.Fit {
		c.at(p+".fit", `not accepted with store: redis (the fleet's Redis takes a reserve whole; fitting it to what the window holds is the replica's own cell's); use store: local or share, or remove fit:`)
	}
	if t == TPM {
		if alg != rate.GCRA {
			c.boot(l, p+".algorithm", `type "tpm" (reserve/reconcile) requires algorithm "gcra", got %q (only gcra can hand back the unused part of a reserve); remove algorithm: or set it to gcra`, cl.Algorithm)
		}
	} else {
		switch {
		case alg == rate.TokenBucket && (store == StoreRedis || store == StoreShare):
			c.boot(l, p+".store", `algorithm "token_bucket" cannot bind store %q (token_bucket runs on the local store only); use gcra, or store: local`, store)
		case store == StoreShare && alg != rate.GCRA:
			c.boot(l, p+".store", `store "share" requires algorithm "gcra", got %q (share divides a gcra rate across replicas); use gcra, or store: local`, cl.Algorithm)
		}
		if (alg == rate.FixedWindow || alg == rate.SlidingWindow) && amountOK && l.Amount > WindowCeiling {
			c.boot(l, p+".amount", "algorithm %q counts at most %d per window, and amount %d is above it; use gcra (the default) or token_bucket, or a shorter window with a smaller amount", cl.Algorithm, WindowCeiling, l.Amount)
		}
	}

	if !amountOK {
		return
	}
	burst := l.Amount
	if cl.Burst != nil {
		if *cl.Burst <= 0 {
			c.at(p+".burst", "must be positive, got %d (it defaults to amount)", *cl.Burst)
			return
		}
		burst = *cl.Burst
	}
	l.Burst = burst
	switch {
	case t == TPM && l.Fit && l.Metric != MetricInput && burst < l.MinOutput:
		c.boot(l, p+".burst", "tpm limit %q: burst %d is below min_output %d, so no call could ever be let through with its least output; raise burst (default is amount %d), or lower min_output", l.ID, burst, l.MinOutput, l.Amount)
	case t == TPM && !l.Fit && l.Metric != MetricInput && burst < ReserveCap:
		c.boot(l, p+".burst", "tpm limit %q: burst %d is below the reserve cap %d — an ordinary max-token reserve could never fit (a permanent 100%% refusal); raise burst (default is amount %d) to at least the reserve cap", l.ID, burst, ReserveCap, l.Amount)
	}
}

// OverrideRefusal is the reason a per-node override on a rate or
// concurrency limit is turned down (seed 002).
func OverrideRefusal(t Type) string {
	return `limit type "` + t.String() + `" does not support per-node overrides (its cap is enforced by a per-window/gauge store that cannot honor a per-node amount); overrides apply only to spend/quota limits (budget_usd, quota_tokens, quota_requests)`
}

func (c *compiler) override(l *Limit, p string, o *config.Override) {
	if o == nil {
		return
	}
	t := l.Type
	op := p + ".override"
	if !t.Overridable() {
		if o.Allow {
			c.at(op+".allow", "%s", OverrideRefusal(t))
		}
		if o.MaxAmount != nil {
			c.at(op+".max_amount", "not accepted on %s (it takes no per-node overrides; to vary a rate cap per node, pin a separate limit at that node)", t)
		}
		if o.MaxAmountUSD != nil {
			c.at(op+".max_amount_usd", "not accepted on %s (it takes no per-node overrides; to vary a rate cap per node, pin a separate limit at that node)", t)
		}
		return
	}
	ceiling := false
	if t == BudgetUSD {
		if o.MaxAmount != nil {
			c.at(op+".max_amount", "not accepted on budget_usd (write max_amount_usd, in dollars)")
		}
		if m := o.MaxAmountUSD; m != nil {
			ceiling = true
			if m.Nanos <= 0 {
				c.at(op+".max_amount_usd", "must be positive, got %s (omit it to declare no ceiling)", m)
			} else {
				l.OverrideMax = m.Nanos
			}
		}
	} else {
		if o.MaxAmountUSD != nil {
			c.at(op+".max_amount_usd", "not accepted on %s (only budget_usd counts dollars; write max_amount, in %s)", t, t.Unit())
		}
		if m := o.MaxAmount; m != nil {
			ceiling = true
			if *m <= 0 {
				c.at(op+".max_amount", "must be positive, got %d (omit it to declare no ceiling)", *m)
			} else {
				l.OverrideMax = *m
			}
		}
	}
	if ceiling && !o.Allow {
		c.at(op, "a ceiling without allow: true permits no override; set allow: true, or remove the ceiling")
	}
	l.OverrideAllow = o.Allow
}

func (c *compiler) match(l *Limit, p string, m *config.Match, typeOK bool) {
	l.gate = l.Type.Gate()
	if m == nil {
		return
	}
	l.Match = Match{Model: m.Model, Provider: m.Provider, Endpoint: m.Endpoint, Customer: m.Customer, Tag: m.Tag}
	if m.Model != "" {
		if _, err := path.Match(m.Model, ""); err != nil {
			c.at(p+".match.model", "malformed pattern %q: %v (patterns use Go's path.Match, where * does not cross a /)", m.Model, err)
		}
		l.glob = strings.ContainsAny(m.Model, `*?[\`)
	}
	switch {
	case m.Endpoint != "" && (!strings.HasPrefix(m.Endpoint, "/") || strings.ContainsAny(m.Endpoint, "?#")):
		c.at(p+".match.endpoint", "%q is not a request path; write the path without a query, e.g. /v1/chat/completions", m.Endpoint)
	case m.Endpoint != "" && path.Clean(m.Endpoint) != m.Endpoint:
		c.at(p+".match.endpoint", "%q never matches: the gateway compares the cleaned path; write %q", m.Endpoint, path.Clean(m.Endpoint))
	case m.Endpoint != "":
		// A governed endpoint under a route prefix (/openai/v1/chat/completions)
		// is the canonical path in a request's endpoint dim.
		if ep := llm.EndpointOf(m.Endpoint); ep != llm.Unknown && ep.String() != m.Endpoint {
			c.at(p+".match.endpoint", "%q never matches: a request to a governed endpoint is matched by its canonical path, whatever route prefix it was sent under (a call to %s counts as %s); write %q", m.Endpoint, m.Endpoint, ep, ep.String())
		}
	}
	if m.Provider != "" && !ProviderNameOK(m.Provider) {
		c.at(p+".match.provider", "%q never matches: provider names are lowercase letters, digits, '-', '_' and '.' (openai, anthropic, or a name of the filter's providers mapping); write %q", m.Provider, strings.ToLower(m.Provider))
	}
	if m.Customer != "" && !c.unbuilt(p+".match.customer", "match.customer") {
		l.customerGlob = c.valuePattern(p+".match.customer", m.Customer, CustomerID)
	}
	if m.Tag != "" && !c.unbuilt(p+".match.tag", "match.tag") {
		l.tagGlob = c.valuePattern(p+".match.tag", m.Tag, TagID)
	}
	if typeOK && l.Type.Gate() == Gate1 && (m.Model != "" || m.Provider != "" || m.Customer != "" || m.Tag != "") {
		// The model (and the customer a body may name) is known once the
		// body is read: such a rate or concurrency limit is evaluated at the
		// second gate.
		l.gate = Gate2
	}
}

// valuePattern checks a customer or tag pattern: one path.Match pattern
// whose literal characters the identifier's charset allows. It reports
// whether the pattern has metacharacters (one counter per value).
func (c *compiler) valuePattern(at, pattern string, kind IDKind) bool {
	if pattern == "" {
		return false
	}
	if _, err := path.Match(pattern, ""); err != nil {
		c.at(at, "malformed pattern %q: %v (patterns use Go's path.Match: * matches any run of characters but /, ? one character)", pattern, err)
		return false
	}
	for i := 0; i < len(pattern); i++ {
		if ch := pattern[i]; !strings.ContainsRune(`*?[]\^-`, rune(ch)) && !kind.allows(ch) {
			c.at(at, "%q never matches: it %s", pattern, kind.charsetProblem(pattern, i))
			break
		}
	}
	return strings.ContainsAny(pattern, `*?[\`)
}

func (c *compiler) posture(l *Limit, p string, ps *config.Posture) {
	if ps == nil {
		return // on, hard, open
	}
	if ps.Mode != "" {
		m, ok := parse(modeNames[:], ps.Mode)
		if !ok {
			c.at(p+".posture.mode", "unknown mode %q (known: on, shadow, off)", ps.Mode)
		}
		l.Mode = Mode(m)
	}
	if ps.Enforce != "" {
		e, ok := parse(enforceNames[:], ps.Enforce)
		if !ok {
			c.at(p+".posture.enforce", "unknown enforce %q (known: hard, soft)", ps.Enforce)
		}
		l.Enforce = Enforce(e)
	}
	if ps.Fail != "" {
		f, ok := parse(failNames[:], ps.Fail)
		if !ok {
			c.at(p+".posture.fail", "unknown fail %q (known: open, closed)", ps.Fail)
		}
		l.Fail = Fail(f)
	}
	if l.Enforce == EnforceSoft && l.Fail == FailClosed {
		// Shadow with fail: closed is a posture staged for turning on; soft
		// never refuses, so closed could never act.
		c.at(p+".posture.fail", "closed acts only with enforce: hard (an uncheckable limit then answers 503), and enforce: soft admits whatever happens, so this limit would fail open; set enforce: hard, or remove fail: closed")
	}
	for k, th := range ps.Thresholds {
		if th < 0 || th > 1 {
			c.at(p+".posture.thresholds["+itoa(k)+"]", "%v is outside [0,1] (a threshold is a fraction of the cap, e.g. 0.8)", th)
		}
	}
	if len(ps.Thresholds) > 0 {
		l.Thresholds = append([]float64(nil), ps.Thresholds...)
		sort.Float64s(l.Thresholds)
	}
}

// ProviderNameOK reports whether s can be a provider name: what the filter
// infers (openai, anthropic) and what its providers mapping may name are
// lowercase letters, digits, '-', '_' and '.'.
func ProviderNameOK(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
