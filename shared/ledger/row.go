// Package ledger owns the ledger row: the record of one finished request
// (or of a call's start, a summary of several requests, the accountant's
// estimated close of a call whose end never came: Kind) that the filter
// sends to the accountant and the accountant appends to decisions.jsonl.
// Its JSON form is a wire contract, golden-tested: (*Row).AppendJSON writes
// it without reflection, ParseRow reads it strictly, AppendJSONL,
// ParseJSONL and Decoder handle batches of JSON lines, and Bound holds a
// row to its size bounds.
package ledger

import (
	"time"

	"github.com/tokentriage/tokentriage/shared/wire"
)

// Decision says what the gates did with a request.
type Decision string

const (
	// Admitted: forwarded, no limit over.
	Admitted Decision = "admitted"
	// Refused: turned away (429, 401, 403, 400, 413, 503).
	Refused Decision = "refused"
	// ShadowRefused: forwarded, but a shadow-mode limit would have refused.
	ShadowRefused Decision = "shadow_refused"
	// SoftBreach: forwarded although a soft-enforced limit was over.
	SoftBreach Decision = "soft_breach"
	// Passthrough: forwarded without governance: a path that is not a
	// governed provider endpoint (GET /v1/models, a file upload), let
	// through by the key's allow_passthrough scope or with require_key
	// off. Recorded so that every forwarded request leaves a row; never
	// priced; counted by quota_requests (as the filter checks it), unless
	// the row is Free.
	Passthrough Decision = "passthrough"
)

// Folded reports whether a row of decision d counts: it was forwarded
// through the gates, so it is priced and folded into the LedgerSettled
// counters (admitted, shadow_refused, soft_breach). Refused and
// passthrough rows are recorded only.
func (d Decision) Folded() bool {
	return d == Admitted || d == ShadowRefused || d == SoftBreach
}

// Known reports whether d is one of the decisions a row may carry.
func (d Decision) Known() bool { return d.Folded() || d == Refused || d == Passthrough }

// Row is one finished request.
type Row struct {
	RequestID string    `json:"request_id"` // tt_ + 26 base32 chars
	Start     time.Time `json:"start"`      // request headers arrived (UTC)
	End       time.Time `json:"end"`        // stream finished (UTC)
	KID       string    `json:"kid"`        // "" for anonymous traffic
	Node      string    `json:"node"`       // owner node of the key; "" anonymous
	Endpoint  string    `json:"endpoint"`   // request path without query
	Provider  string    `json:"provider"`
	Model     string    `json:"model"`        // as requested
	Served    string    `json:"model_served"` // as reported by the provider
	Stream    bool      `json:"stream"`
	Usage     Usage     `json:"usage"`
	Status    int       `json:"status"` // HTTP status the client saw
	Decision  Decision  `json:"decision"`
	// ErrorType is the error.type of a refusal ("budget_exceeded",
	// "unauthorized", ...), empty when served.
	ErrorType string `json:"error_type"`
	// RefusedBy names the limit instance that refused, or nil.
	RefusedBy *Ref `json:"refused_by"`
	// Shadow lists limits in shadow mode that would have refused.
	Shadow []Ref `json:"shadow"`
	// Breached lists soft-enforced limits that were over and admitted.
	Breached []Ref `json:"breached"`
	// Suspended lists limit ids that could not be checked (stale or
	// missing snapshot, unavailable store) and were admitted.
	Suspended []string  `json:"suspended"`
	Estimated Estimated `json:"estimated"`
	// Replica identifies the filter instance (host process) that produced
	// the row.
	Replica string `json:"replica"`
	// ServedOutOfScope is set when the key's model scope did not allow
	// the model that served the request (a route or a provider that
	// substituted another): the request was admitted on the model it
	// named, and the row says what answered. Written only when true.
	ServedOutOfScope bool `json:"served_out_of_scope,omitempty"`
	// UsageClamped is set when the provider reported more usage than the
	// request could have produced (more input than the model's context
	// bound, more output than the request's output maximum): the row
	// carries the bound instead, with the clamped figures marked
	// estimated. Written only when true.
	UsageClamped bool `json:"usage_clamped,omitempty"`
	// Free marks a passthrough row of a call that bills nothing (the
	// model list, a model's details, Anthropic's token count): recorded,
	// like every forwarded call, but counted by no limit and left out of
	// the request counts of spend reports. Written only when true.
	Free bool `json:"free,omitempty"`
	// GatewayEnd is the end time the gateway reported, when the
	// accountant re-dated the row because it lay too far from its own
	// clock: End (and Start, by the same shift) then holds the
	// accountant's clock at receipt, which picks the row's period.
	// Written only when set.
	GatewayEnd time.Time `json:"gateway_end,omitzero"`
	// Reconcile carries the tpm reconciles of the request's store: redis
	// instances, which the accountant commits in the fleet's Redis when it
	// records the row (once: a row is recorded once by its request id).
	// Each is "<algorithm> <amount> <period ns> <burst> <signed tokens>
	// <counter identity>". Written only when there are some.
	Reconcile []string `json:"reconcile,omitempty"`
	// Holds names the budget holds (reserve: true) the request took in
	// the fleet's Redis, which the accountant releases when it records
	// the row (once: the hold is named by the request id), raising its
	// published total by the call's cost in the same step. Each is
	// "<calendar unit> <period start, unix s> <counter identity>". Written
	// only when there are some.
	Holds []string `json:"holds,omitempty"`
	// Kind says what the row records: a finished request (KindEnd, written
	// as nothing, as every row was before kinds), an admitted call's start
	// (KindStart), the totals of several requests (KindSummary) or the
	// accountant's estimated close of a call whose end never came
	// (KindClose). See Kind.
	Kind Kind `json:"kind,omitempty"`
	// Count is the number of requests a summary row stands for (at least
	// 1); its usage is their sum. Written only on summary rows.
	Count int64 `json:"count,omitempty"`
	// LeaseTTLMS is, on a start row, the filter's lease_ttl in
	// milliseconds: the accountant closes the call at its estimate once
	// that long has passed since it last heard of it. Written only on
	// start rows.
	LeaseTTLMS int64 `json:"lease_ttl_ms,omitempty"`
	// Cut lists the members Bound shortened (a string cut to
	// MaxFieldBytes, a list to MaxListItems), in row order. Written only
	// when some were.
	Cut []string `json:"cut,omitempty"`
	// Replaced is, on a request's end that arrived after the accountant
	// had closed the call at its estimate, that estimate: the end's
	// figures replace it (a reader subtracts it and adds the end), never
	// add to it. Set by the accountant; written only when set.
	Replaced *Replaced `json:"replaced,omitempty"`
	// Customer is the request's customer (X-Tt-Customer, or a body field
	// such as OpenAI's user), "" when it named none. Written only when set.
	Customer string `json:"customer,omitempty"`
	// Tags are the request's tags (X-Tt-Tags), sorted, each once. Written
	// only when there are some.
	Tags []string `json:"tags,omitempty"`
	// Fallback names the limit whose refusal the request escaped by being
	// served with another model, and that model (the body was rewritten:
	// Model is what the caller asked for). Written only when set.
	Fallback *Fallback `json:"fallback,omitempty"`
	// Overflow lists the limits that count one counter per value (a
	// model, customer or tag pattern) and counted this request in their
	// overflow counter: the values past max_distinct share it. Written
	// only when there are some.
	Overflow []string `json:"overflow,omitempty"`
	// Cost is set by the accountant when it prices the row; the filter
	// leaves it nil.
	Cost *Cost `json:"cost"`
}

// Kind says what a row records.
type Kind string

const (
	// KindEnd is a finished request: one request, counted once its row
	// is recorded. Every row written before kinds existed is one.
	KindEnd Kind = ""
	// KindStart is an admitted call's start, sent while the call is in
	// flight: it counts nothing itself. If the call's end never arrives
	// (its proxy died), the accountant closes it with a KindClose row.
	KindStart Kind = "start"
	// KindSummary stands for Count requests of the same key, node, model,
	// provider, endpoint, decision and status that ended within one
	// quarter of an hour: what a filter folds its rows into when its queue
	// to the accountant is full, and the unauthenticated refusals past its
	// sampling rate. Its usage and cost are the requests' sums.
	KindSummary Kind = "summary"
	// KindClose is written by the accountant for a call whose start it
	// recorded and whose end never came within the start's lease_ttl: the
	// call counted at its reserved estimate, marked estimated. A later
	// end of the same request replaces it (Replaced).
	KindClose Kind = "close"
)

// Known reports whether k is one of the kinds a row may carry.
func (k Kind) Known() bool {
	return k == KindEnd || k == KindStart || k == KindSummary || k == KindClose
}

// Requests is the number of requests the row counts as: a summary's
// Count, none for a start (its end or close counts the call), one for
// every other row.
func (r *Row) Requests() int64 {
	switch r.Kind {
	case KindStart:
		return 0
	case KindSummary:
		return max(r.Count, 1)
	}
	return 1
}

// Key is the row's identity for deduplication: its request id packed, and
// the class of its kind (a finished request and a summary share one, a
// start and a close have one each), so a reader of several ledgers counts
// each request once, and a request's start, close and end are each
// recorded once. ok is false when the request id is malformed.
func (r *Row) Key() (key [17]byte, ok bool) {
	id, ok := wire.ParseRequestID(r.RequestID)
	copy(key[:], id[:])
	switch r.Kind {
	case KindStart:
		key[16] = 1
	case KindClose:
		key[16] = 2
	}
	return key, ok
}

// Replaced is the estimate a late end replaces: the close row's end, usage
// and cost.
type Replaced struct {
	End   time.Time `json:"end"`
	Usage Usage     `json:"usage"`
	Cost  *Cost     `json:"cost"`
}

// Fallback is a request served with a limit's fallback model.
type Fallback struct {
	LimitID string `json:"limit_id"`
	Model   string `json:"model"`
}

// Sent is the model the request was sent upstream with: the fallback's
// when it fell back, else the one it asked for.
func (r *Row) Sent() string {
	if r.Fallback != nil && r.Fallback.Model != "" {
		return r.Fallback.Model
	}
	return r.Model
}

// Usage is what the provider reported (or the filter estimated).
type Usage struct {
	Input       int64 `json:"input"`
	Output      int64 `json:"output"`
	CachedInput int64 `json:"cached_input"`
	Reasoning   int64 `json:"reasoning"`
	Total       int64 `json:"total"`
}

// Ref names one limit instance.
type Ref struct {
	LimitID   string `json:"limit_id"`
	LimitType string `json:"limit_type"`
	Node      string `json:"node"`
}

// Estimated flags usage figures that were estimated rather than reported.
type Estimated struct {
	Input  bool `json:"input"`
	Output bool `json:"output"`
}

// Cost is the priced cost of a row, on the nanodollar grid.
type Cost struct {
	Nanos     int64 `json:"nanos"`
	Unpriced  bool  `json:"unpriced"`
	Estimated bool  `json:"estimated"`
}
