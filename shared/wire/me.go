package wire

import (
	"github.com/tokentriage/tokentriage/shared/jsontok"
	"time"
)

// Me is the GET /tt/v1/me document (seed 004): the caller's key, its chain
// and scopes, and every limit instance it resolves with live numbers.
//
// The document is pretty-printed the way the seed shows it: one top-level
// member per line, two-space indent, each limit on its own line and compact
// inside, chain and scopes compact, a newline after the closing brace.
type Me struct {
	KID string
	// Name is the key's name and ExpiresAt its expiry (Unix seconds):
	// shown after kid only when the key has one.
	Name      string
	ExpiresAt int64
	Node      string
	Chain     []string
	// Scopes are the key's scopes; a nil list (unrestricted) is null.
	Scopes Scopes
	Limits []MeLimit
}

// Scopes are a key's scopes as /tt/v1/me shows them. Customers is written
// only when the key has that scope.
type Scopes struct {
	Models           []string
	Providers        []string
	Endpoints        []string
	AllowPassthrough bool
	Customers        []string
}

// MeLimit is one resolved limit instance. A budget_usd instance is shown in
// the spend shape (limit_usd, observed_usd, remaining_usd, each a USD
// object); every other type in the count shape (amount, observed,
// remaining). Spend and quota types carry resets_at, the end of the period;
// rpm and tpm carry resets_at, when the window is back at its full burst,
// and retry_after_s, the seconds until the next unit (a request, a token)
// frees, 0 while some remain.
type MeLimit struct {
	LimitID string
	Type    LimitType
	Node    string
	// Period is day/week/month, a window ("1m0s"), or "" for concurrency.
	Period   string
	ResetsAt time.Time
	// RetryAfter is rpm's and tpm's retry_after_s.
	RetryAfter int64
	Suspended  bool
	Posture    Posture
	// Spend shape (budget_usd).
	LimitUSD, ObservedUSD, RemainingUSD USD
	// Count shape: the cap, what is in use or counted, and what is left.
	// For rpm and tpm, observed is Limit − Remaining of a rate.Peek.
	Amount, Observed, Remaining int64
	// Policy details, each written only when set (the rows of a plan
	// that uses none of them read as they always have):
	Extra LimitExtra
}

// LimitExtra is what a limit row of /tt/v1/me (and a definition of the
// limits API) says beyond seed 004's members, each only when set:
//
//	"evaluated_at":"request_body"  an rpm or concurrency limit narrowed by
//	                               what the body names, judged at gate 2
//	"metric":"output"              a token limit counting input or output
//	"timezone":"Europe/Berlin"     the zone of the period's boundaries
//	"fit":true,"min_output":256    the output maximum is lowered to fit
//	"fallback":"gpt-4o-mini"       the model a refusal falls back to
//	"customer":"c1"                the customer this counter is (also "")
//	"tag":"batch"                  the tag this counter is
//	"overflow":true                the counter values past max_distinct share
//	"distinct":12,"max_distinct":N the instance's counters this period (when
//	                               the accountant counts them) and its bound
type LimitExtra struct {
	Evaluated   string
	Metric      string
	Timezone    string
	Fit         bool
	MinOutput   int64
	Fallback    string
	Customer    *string
	Tag         string
	Overflow    bool
	Distinct    int64
	MaxDistinct int64
}

func (x *LimitExtra) appendJSON(dst []byte, counter bool) []byte {
	if x.Evaluated != "" {
		dst = jsontok.AppendKeyString(dst, `,"evaluated_at":`, x.Evaluated)
	}
	if x.Metric != "" {
		dst = jsontok.AppendKeyString(dst, `,"metric":`, x.Metric)
	}
	if x.Timezone != "" {
		dst = jsontok.AppendKeyString(dst, `,"timezone":`, x.Timezone)
	}
	if x.Fit {
		dst = jsontok.AppendKeyInt(dst, `,"fit":true,"min_output":`, x.MinOutput)
	}
	if x.Fallback != "" {
		dst = jsontok.AppendKeyString(dst, `,"fallback":`, x.Fallback)
	}
	if x.Customer != nil {
		dst = jsontok.AppendKeyString(dst, `,"customer":`, *x.Customer)
	}
	if x.Tag != "" {
		dst = jsontok.AppendKeyString(dst, `,"tag":`, x.Tag)
	}
	if x.Overflow {
		dst = append(dst, `,"overflow":true`...)
	}
	if x.MaxDistinct > 0 {
		if counter && x.Distinct >= 0 {
			dst = jsontok.AppendKeyInt(dst, `,"distinct":`, x.Distinct)
		}
		dst = jsontok.AppendKeyInt(dst, `,"max_distinct":`, x.MaxDistinct)
	}
	return dst
}

// USD is a dollar figure with its provenance: Estimated when some of it
// rests on estimated usage, Unpriced when some usage had no price.
type USD struct {
	Nanos     int64
	Estimated bool
	Unpriced  bool
}

func (u USD) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"usd":`...)
	dst = AppendUSD(dst, u.Nanos)
	dst = jsontok.AppendKeyBool(dst, `,"estimated":`, u.Estimated)
	dst = jsontok.AppendKeyBool(dst, `,"unpriced":`, u.Unpriced)
	return append(dst, '}')
}

// AppendJSON appends the document.
func (m *Me) AppendJSON(dst []byte) []byte {
	dst = append(dst, "{\n  \"kid\": "...)
	dst = jsontok.AppendString(dst, m.KID)
	if m.Name != "" {
		dst = append(dst, ",\n  \"name\": "...)
		dst = jsontok.AppendString(dst, m.Name)
	}
	if m.ExpiresAt != 0 {
		dst = append(dst, ",\n  \"expires_at\": "...)
		dst = appendSecondTime(dst, time.Unix(m.ExpiresAt, 0))
	}
	dst = append(dst, ",\n  \"node\": "...)
	dst = jsontok.AppendString(dst, m.Node)
	dst = append(dst, ",\n  \"chain\": "...)
	dst = appendStrings(dst, nonNil(m.Chain))
	dst = append(dst, ",\n  \"scopes\": "...)
	dst = m.Scopes.appendJSON(dst)
	dst = append(dst, ",\n  \"limits\": "...)
	dst = appendLines(dst, len(m.Limits), func(dst []byte, i int) []byte { return m.Limits[i].appendJSON(dst) })
	return append(dst, "\n}\n"...)
}

func (s Scopes) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"models":`...)
	dst = appendStrings(dst, s.Models)
	dst = append(dst, `,"providers":`...)
	dst = appendStrings(dst, s.Providers)
	dst = append(dst, `,"endpoints":`...)
	dst = appendStrings(dst, s.Endpoints)
	dst = jsontok.AppendKeyBool(dst, `,"allow_passthrough":`, s.AllowPassthrough)
	if s.Customers != nil {
		dst = append(dst, `,"customers":`...)
		dst = appendStrings(dst, s.Customers)
	}
	return append(dst, '}')
}

func (l *MeLimit) appendJSON(dst []byte) []byte {
	dst = jsontok.AppendKeyString(dst, `{"limit_id":`, l.LimitID)
	dst = jsontok.AppendKeyString(dst, `,"type":`, string(l.Type))
	dst = jsontok.AppendKeyString(dst, `,"class":`, l.Type.Class())
	dst = jsontok.AppendKeyString(dst, `,"unit":`, l.Type.Unit())
	dst = jsontok.AppendKeyString(dst, `,"node":`, l.Node)
	dst = jsontok.AppendKeyString(dst, `,"period":`, l.Period)
	rate := l.Type == RPM || l.Type == TPM
	if l.Type.Settled() || rate {
		dst = append(dst, `,"resets_at":`...)
		dst = appendSecondTime(dst, l.ResetsAt)
	}
	dst = jsontok.AppendKeyBool(dst, `,"suspended":`, l.Suspended)
	dst = append(dst, `,"posture":`...)
	dst = l.Posture.appendJSON(dst)
	if l.Type == BudgetUSD {
		dst = append(dst, `,"limit_usd":`...)
		dst = l.LimitUSD.appendJSON(dst)
		dst = append(dst, `,"observed_usd":`...)
		dst = l.ObservedUSD.appendJSON(dst)
		dst = append(dst, `,"remaining_usd":`...)
		dst = l.RemainingUSD.appendJSON(dst)
	} else {
		dst = jsontok.AppendKeyInt(dst, `,"amount":`, l.Amount)
		dst = jsontok.AppendKeyInt(dst, `,"observed":`, l.Observed)
		dst = jsontok.AppendKeyInt(dst, `,"remaining":`, l.Remaining)
		if rate {
			dst = jsontok.AppendKeyInt(dst, `,"retry_after_s":`, l.RetryAfter)
		}
	}
	dst = l.Extra.appendJSON(dst, true)
	return append(dst, '}')
}

// appendLines appends an array of n objects, one per line at a four-space
// indent, closed at a two-space indent; [] when empty.
func appendLines(dst []byte, n int, item func([]byte, int) []byte) []byte {
	if n == 0 {
		return append(dst, "[]"...)
	}
	dst = append(dst, '[')
	for i := 0; i < n; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, "\n    "...)
		dst = item(dst, i)
	}
	return append(dst, "\n  ]"...)
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}
