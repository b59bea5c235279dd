package govern

import (
	"strconv"

	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/rate"
	"github.com/tokentriage/tokentriage/shared/wire"
)

var typeNames = [...]string{
	BudgetUSD:     "budget_usd",
	QuotaTokens:   "quota_tokens",
	QuotaRequests: "quota_requests",
	RPM:           "rpm",
	TPM:           "tpm",
	Concurrency:   "concurrency",
}

// String returns the type's config spelling (budget_usd, rpm, ...).
func (t Type) String() string { return name(typeNames[:], int(t)) }

// ParseType reads a type's config spelling.
func ParseType(s string) (Type, bool) {
	for t, name := range typeNames {
		if name != "" && name == s {
			return Type(t), true
		}
	}
	return 0, false
}

// Class is the enforcement class of the type (seed 000).
func (t Type) Class() Class {
	switch t {
	case BudgetUSD, QuotaTokens, QuotaRequests:
		return LedgerSettled
	case RPM:
		return AdmissionCounted
	case TPM:
		return ReserveReconcile
	case Concurrency:
		return InflightLease
	}
	return 0
}

// Gate is where the type is evaluated: rpm and concurrency at Gate1 (request
// headers), the other four at Gate2 (parsed body).
func (t Type) Gate() Gate {
	if t == RPM || t == Concurrency {
		return Gate1
	}
	return Gate2
}

// Unit is the wire unit of the type: usd, tokens, requests or
// concurrent-requests.
func (t Type) Unit() string { return t.Wire().Unit() }

// FormatAmount is an amount of this type written in its unit, as a JSON
// number or a CSV cell takes it: dollars as an exact decimal with no more
// places than they need for budget_usd (v in nanodollars), the count
// otherwise.
func (t Type) FormatAmount(v int64) string {
	if t == BudgetUSD {
		return config.USD{Nanos: v}.String()
	}
	return strconv.FormatInt(v, 10)
}

// ErrorType is the error.type of a 429 from a limit of this type; "" for
// an unknown type.
func (t Type) ErrorType() string {
	if t.Unit() == "" {
		return ""
	}
	return t.Wire().ErrorType()
}

// WireClass is the class field of /tt/v1/me and the limits API: "spend" for
// budget_usd, "count" for the rest.
func (t Type) WireClass() string { return t.Wire().Class() }

// Wire is the type as its name appears on the wire.
func (t Type) Wire() wire.LimitType { return wire.LimitType(t.String()) }

// Overridable reports whether per-node overrides apply to the type: only
// the spend and quota types read an instance's amount at runtime.
func (t Type) Overridable() bool { return t.Class() == LedgerSettled }

// IsRate reports whether the type counts over a window (rpm, tpm).
func (t Type) IsRate() bool { return t == RPM || t == TPM }

var classNames = [...]string{
	LedgerSettled:    "LedgerSettled",
	AdmissionCounted: "AdmissionCounted",
	ReserveReconcile: "ReserveReconcile",
	InflightLease:    "InflightLease",
}

// String returns the class name of seed 000 (LedgerSettled, ...).
func (c Class) String() string { return name(classNames[:], int(c)) }

// String returns "gate1" or "gate2".
func (g Gate) String() string {
	switch g {
	case Gate1:
		return "gate1"
	case Gate2:
		return "gate2"
	}
	return "unknown"
}

var (
	modeNames    = [...]string{ModeOn: "on", ModeShadow: "shadow", ModeOff: "off"}
	enforceNames = [...]string{EnforceHard: "hard", EnforceSoft: "soft"}
	failNames    = [...]string{FailOpen: "open", FailClosed: "closed"}
	storeNames   = [...]string{StoreLocal: "local", StoreRedis: "redis", StoreShare: "share"}
)

// String returns on, shadow or off.
func (m Mode) String() string { return name(modeNames[:], int(m)) }

// String returns hard or soft.
func (e Enforce) String() string { return name(enforceNames[:], int(e)) }

// String returns open or closed.
func (f Fail) String() string { return name(failNames[:], int(f)) }

// String returns local, redis or share.
func (s Store) String() string { return name(storeNames[:], int(s)) }

// name is the name of value i in names (indexed by value), "unknown"
// for a value it does not name.
func name(names []string, i int) string {
	if i >= 0 && i < len(names) && names[i] != "" {
		return names[i]
	}
	return "unknown"
}

func parse(names []string, s string) (int, bool) {
	for i, n := range names {
		if n == s {
			return i, true
		}
	}
	return 0, false
}

// PostureLabel is the posture as the wire names it: "enforcing" for on and
// hard, "soft" for on and soft, "alert_only" for shadow, "off" for off.
func PostureLabel(m Mode, e Enforce) string {
	switch m {
	case ModeShadow:
		return "alert_only"
	case ModeOff:
		return "off"
	}
	if e == EnforceSoft {
		return "soft"
	}
	return "enforcing"
}

// PostureLabel is the limit's posture label (see the PostureLabel func).
func (l *Limit) PostureLabel() string { return PostureLabel(l.Mode, l.Enforce) }

// AlgorithmName returns the config spelling of a rate algorithm (gcra,
// fixed_window, sliding_window, token_bucket), or "" for none.
func AlgorithmName(a rate.Algorithm) string {
	switch a {
	case rate.GCRA:
		return "gcra"
	case rate.FixedWindow:
		return "fixed_window"
	case rate.SlidingWindow:
		return "sliding_window"
	case rate.TokenBucket:
		return "token_bucket"
	}
	return ""
}

func parseAlgorithm(s string) (rate.Algorithm, bool) {
	for _, a := range []rate.Algorithm{rate.GCRA, rate.FixedWindow, rate.SlidingWindow, rate.TokenBucket} {
		if AlgorithmName(a) == s {
			return a, true
		}
	}
	return 0, false
}

// CalendarName returns hour, day, week, month, quarter or year, or "" for
// none.
func CalendarName(u calendar.Unit) string {
	if s := u.String(); s != "unknown" {
		return s
	}
	return ""
}

func parseCalendar(s string) (calendar.Unit, bool) { return calendar.ParseUnit(s) }
