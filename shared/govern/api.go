// Package govern compiles a governance configuration into an immutable Plan
// and resolves, for one request, the ordered limit instances that bind it
// (seed 004's seven steps). It owns the tenancy tree, node id grammar,
// counter identity, per-node overrides (Arm) and the compile errors of seeds
// 002 and 004, word for word.
//
// The API below is the contract the filter and the accountant are written
// against; everything is pure (no clock, no I/O) and builds for wasip1.
package govern

import (
	"time"

	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/rate"
)

// Global is the synthetic root node every chain ends at.
const Global = "__global"

// Type is a limit type.
type Type uint8

// The six limit types, in the order the product registers them.
const (
	BudgetUSD Type = iota + 1
	QuotaTokens
	QuotaRequests
	RPM
	TPM
	Concurrency
)

// Class is an enforcement class (seed 000).
type Class uint8

const (
	LedgerSettled Class = iota + 1
	AdmissionCounted
	ReserveReconcile
	InflightLease
)

// Gate is where a limit is evaluated: Gate1 at request headers (rpm,
// concurrency), Gate2 once the body is parsed (spend, quota, tpm).
type Gate uint8

const (
	Gate1 Gate = 1
	Gate2 Gate = 2
)

// Mode, Enforce and Fail are the posture switches.
type Mode uint8
type Enforce uint8
type Fail uint8

const (
	ModeOn Mode = iota
	ModeShadow
	ModeOff
)

const (
	EnforceHard Enforce = iota
	EnforceSoft
)

const (
	FailOpen Fail = iota
	FailClosed
)

// Store is where a rate or concurrency counter lives.
type Store uint8

const (
	StoreLocal Store = iota
	StoreRedis
	StoreShare
)

// Period is a limit's period: a calendar unit or a rolling window of days
// for spend and quota types, a window for rpm and tpm, neither for
// concurrency.
type Period struct {
	Calendar calendar.Unit // zero when the period is a window or rolling
	Window   time.Duration // zero when the period is calendar or rolling
	// Rolling is a rolling window of whole days (period: 30d), counted in
	// day buckets by seed 003's sliding rule; zero otherwise.
	Rolling int
	// Zone is the IANA time zone of the calendar boundaries (a period's
	// start, a rolling window's day buckets); "" is UTC.
	Zone string
	loc  *time.Location
}

// Metric is what a token limit (quota_tokens, tpm) counts.
type Metric uint8

const (
	MetricTotal Metric = iota // input + output (the default)
	MetricInput
	MetricOutput
)

// Limit is one compiled limit definition. Immutable.
type Limit struct {
	ID    string
	Index int    // position in governance.limits, for error paths
	Path  string // its config path, governance.limits[<Index>]
	Type  Type
	// Exactly one of Node (pinned) and Level (template: org, team, user).
	Node  string
	Level string
	// Amount is the cap: a count, or nanodollars for budget_usd.
	Amount int64
	// Burst is the effective burst (default Amount) for rate types.
	Burst     int64
	Period    Period
	Algorithm rate.Algorithm // rate types; zero otherwise
	Store     Store
	Match     Match
	Mode      Mode
	Enforce   Enforce
	Fail      Fail
	// Thresholds are alert fractions in [0,1], ascending.
	Thresholds []float64
	// OverrideAllow permits per-node overrides; OverrideMax is the ceiling
	// (count or nanodollars), or -1 when no ceiling was declared.
	OverrideAllow bool
	OverrideMax   int64
	// Reserve is reserve mode (budget_usd, quota_tokens, quota_requests):
	// admission holds a call's dearest cost against what the period has
	// left.
	Reserve bool
	// Fit lowers a call's output maximum to what the window or period
	// still holds (tpm, quota_tokens; budget_usd in reserve mode, which
	// always fits); MinOutput is the least output a call is admitted with.
	Fit       bool
	MinOutput int64
	// Metric is what a tpm or quota_tokens limit counts.
	Metric Metric
	// Fallback is the model a refusal of this limit (budget_usd,
	// quota_tokens, quota_requests) falls back to, or "".
	Fallback string
	// MaxDistinct bounds the counters of one instance and period when the
	// limit keeps one per value of a dim (a model, customer or tag
	// pattern); 0 when it keeps one counter.
	MaxDistinct int64

	period string // the identity's period field, computed once at compile
	// typeField is the identity's type field when it is not the type's
	// name: "<type>:<metric>" for a token limit counting input or output.
	typeField string
	glob      bool // Match.Model is a pattern with metacharacters
	// customerGlob and tagGlob: Match.Customer or Match.Tag is a pattern
	// with metacharacters (one counter per value).
	customerGlob, tagGlob bool
	maxDistinctSet        bool // max_distinct was written
	gate                  Gate
}

// Match narrows a limit by request dims. Empty fields match anything.
type Match struct {
	Model    string // path.Match pattern against the requested model
	Provider string
	Endpoint string
	Customer string // path.Match pattern against the request's customer
	Tag      string // path.Match pattern against each of the request's tags
}

// Dims are the request's values of the match dims. At Gate1 only Endpoint
// and Provider (and a customer and tags from headers) are known.
type Dims struct {
	Model    string
	Provider string
	Endpoint string
	// Customer is the request's customer; "" when it names none.
	Customer string
	// Tags are the request's tags, sorted, each once, joined by ","
	// (JoinTags); "" when it has none.
	Tags string
}

// Instance is one limit bound to one node for one request.
type Instance struct {
	Limit *Limit
	Node  string
	// Amount is Limit.Amount or the per-node override that replaced it.
	Amount     int64
	Overridden bool
	// ID is the counter identity: limit id, node, the values of the dims
	// the limit constrains, period, algorithm. Never the amount.
	ID string
	// Depth is NodeDepth(Node): instances are ordered deepest first.
	Depth int
	// Unresolved is set only by ResolveAll: the limit keeps one counter per
	// value of a dim the dims did not name (a requested model, customer or
	// tag), so there is no single counter and ID is empty.
	Unresolved bool
	// Tag is the request's tag this instance counts, when the limit keeps
	// one counter per tag (a match.tag pattern): a request with several
	// matching tags has one instance for each.
	Tag string
	// Cell is where the gateway keeps this instance's own cells (a rate
	// window, a gauge, a reserve), when that is not its identity: the slot
	// a per-value instance was given (the gateway bounds the values it
	// keeps cells for, max_distinct). Resolve leaves it empty.
	Cell string
}

// CellKey is the key of the instance's own cells at the gateway: Cell, or
// the identity.
func (in *Instance) CellKey() string {
	if in.Cell != "" {
		return in.Cell
	}
	return in.ID
}

// Override is a per-node override of a spend or quota limit.
type Override struct {
	LimitID string
	Node    string
	Amount  int64 // count, or nanodollars for budget_usd
}

// NodeFacts is what the runtime plane says of one node of a request's
// chain, for a resolver that looks the runtime plane up per request
// (ResolveFacts) instead of arming every runtime node: whether the node is
// in the tree, and the overrides stored at it.
type NodeFacts struct {
	// Tree: the runtime plane has the node in the tree (created through
	// the management API, or above such a node).
	Tree bool
	// Overrides are the overrides stored at the node; their Node is
	// unused (it is the chain node's).
	Overrides []Override
}

// Runtime is the runtime plane the accountant publishes: API-created nodes
// and per-node overrides.
type Runtime struct {
	Nodes     []string
	Overrides []Override
}
