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

// Period is a limit's period: a calendar unit for spend and quota types, a
// window for rpm and tpm, neither for concurrency.
type Period struct {
	Calendar calendar.Unit // zero when the period is a window
	Window   time.Duration // zero when the period is calendar
}

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
	// Reserve is budget reserve mode (budget_usd only).
	Reserve bool

	period string // Period.String(), computed once at compile
	glob   bool   // Match.Model is a pattern with metacharacters
}

// Match narrows a limit by request dims. Empty fields match anything.
type Match struct {
	Model    string // path.Match pattern against the requested model
	Provider string
	Endpoint string
}

// Dims are the request's values of the three match dims. At Gate1 only
// Endpoint is known.
type Dims struct {
	Model    string
	Provider string
	Endpoint string
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
	// requested model (match.model is a glob) and the dims named no model,
	// so there is no single counter and ID is empty.
	Unresolved bool
}

// Override is a per-node override of a spend or quota limit.
type Override struct {
	LimitID string
	Node    string
	Amount  int64 // count, or nanodollars for budget_usd
}

// Runtime is the runtime plane the accountant publishes: API-created nodes
// and per-node overrides.
type Runtime struct {
	Nodes     []string
	Overrides []Override
}
