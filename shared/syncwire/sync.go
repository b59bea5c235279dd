// Package syncwire owns the wire between the filter and the accountant:
// GET /tt/internal/v1/sync and POST /tt/internal/v1/ingest.
//
// The filter polls sync with the versions it holds; the accountant answers
// every part whose version differs and only the version of the parts that
// are current, so a filter that is current gets a small answer.
//
//	GET /tt/internal/v1/sync?plan=P&keys=K&runtime=R&snapshot=S&prices=C&replica=ID
//
// Ingest takes a batch of ledger rows as JSON lines (one ledger.Row per line)
// and answers 200 with an IngestAck once every row is durable.
package syncwire

import (
	"time"

	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// Paths served by the accountant.
const (
	SyncPath   = "/tt/internal/v1/sync"
	IngestPath = "/tt/internal/v1/ingest"
	AlertsPath = "/tt/internal/v1/alerts"
)

// GateAlert is one threshold alert the filter raised for a limit it counts
// at the gate (rpm, tpm, concurrency), sent to AlertsPath as a JSON line so
// that the accountant logs, counts and posts it with its own. Observed and
// Limit are in the limit's unit; Window is the rate window (a Go duration,
// "" for concurrency).
type GateAlert struct {
	LimitID   string    `json:"limit_id"`
	LimitType string    `json:"limit_type"`
	Node      string    `json:"node"`
	Counter   string    `json:"counter"`
	Threshold float64   `json:"threshold"`
	Window    string    `json:"window"`
	Observed  int64     `json:"observed"`
	Limit     int64     `json:"limit"`
	At        time.Time `json:"at"`
}

// Sync is the answer to a sync poll. A part whose version the filter already
// holds carries only its version.
type Sync struct {
	Plan     Plan     `json:"plan"`
	Keys     Keys     `json:"keys"`
	Runtime  Runtime  `json:"runtime"`
	Snapshot Snapshot `json:"snapshot"`
	Prices   Prices   `json:"prices"`
	// Replicas is the number of filter replicas (host processes) that
	// polled within the liveness window; store: share divides by it.
	Replicas int `json:"replicas"`
	// Redis is set when the accountant has the fleet's shared Redis: a
	// budget in reserve mode then holds fleet-wide (AdmitPath), and when
	// Redis cannot decide it falls back to the replica's own count and
	// says suspended.
	Redis bool `json:"redis,omitempty"`
}

// Plan carries the accountant's governance block. Version is the plan hash.
type Plan struct {
	Version    string             `json:"version"`
	Governance *config.Governance `json:"governance,omitempty"`
}

// Keys carries the minted key table (hashes only).
type Keys struct {
	Version string `json:"version"`
	Items   []Key  `json:"items,omitempty"`
}

// Key is one minted virtual key.
type Key struct {
	KID     string      `json:"kid"`
	SHA256  string      `json:"sha256"`
	Owner   string      `json:"owner"`
	Scopes  vkey.Scopes `json:"scopes"`
	Revoked bool        `json:"revoked"`
	// Name is the key's name, unique among its owner's live keys; "" when
	// it has none.
	Name string `json:"name,omitempty"`
	// ExpiresAt is when the key stops authenticating, in Unix seconds; 0
	// never. An expired key is refused 401 with a message naming the
	// expiry.
	ExpiresAt int64 `json:"expires_at,omitempty"`
	// PrevSHA256 is the hash of the secret the key had before its last
	// rotation, accepted beside SHA256 until PrevUntil (Unix seconds); ""
	// when the key was never rotated or that grace period is over.
	PrevSHA256 string `json:"prev_sha256,omitempty"`
	PrevUntil  int64  `json:"prev_until,omitempty"`
}

// Runtime carries the runtime plane: API-created nodes and overrides.
type Runtime struct {
	Version   string     `json:"version"`
	Nodes     []string   `json:"nodes,omitempty"`
	Overrides []Override `json:"overrides,omitempty"`
}

// Override replaces the amount of one instance of a spend or quota limit.
// Amount is a count, or nanodollars for budget_usd.
type Override struct {
	LimitID string `json:"limit_id"`
	Node    string `json:"node"`
	Amount  int64  `json:"amount"`
}

// Snapshot carries every LedgerSettled instance's counter for its current
// calendar period. GeneratedAt is refreshed by the accountant's heartbeat
// and is sent even when the entries are current.
type Snapshot struct {
	Version     string    `json:"version"`
	GeneratedAt time.Time `json:"generated_at"`
	Entries     []Entry   `json:"entries,omitempty"`
	// Fleet, when set, says why the entries hold this accountant's own
	// totals and the other replicas' only as last read: the fleet's shared
	// Redis has not been read within its trust window. A limit they put
	// over is over; one they leave under is uncheckable (suspended, or 503
	// under fail: closed with enforce: hard).
	Fleet string `json:"fleet,omitempty"`
}

// Entry is one counter. ID is the counter identity (govern.Identity);
// PeriodStart the start of the calendar period it counts; Value nanodollars
// for budget_usd, tokens for quota_tokens, requests for quota_requests.
type Entry struct {
	ID          string    `json:"id"`
	PeriodStart time.Time `json:"period_start"`
	Value       int64     `json:"value"`
}

// UnpricedSuffix ends the id of an entry that counts the UNPRICED rows
// (a model with no price: no dollars added) folded into the budget_usd
// counter whose identity it follows, in the same period. It is present
// only when there were some: a dollar figure with such an entry beside it
// is incomplete.
const UnpricedSuffix = "#unpriced"

// EstimatedSuffix ends the id of an entry that counts the rows with
// estimated usage (ledger.Estimated: the provider reported none, or the
// client left before it did) folded into the budget_usd counter whose
// identity it follows, in the same period. It is present only when there
// were some: a dollar figure with such an entry beside it is an estimate.
const EstimatedSuffix = "#estimated"

// CreditSuffix ends the id of an entry that holds what resets and credits
// (POST /tt/api/v1/counters/reset and credit) have taken off the counter
// whose identity it follows, in the same period, in the counter's unit.
// The counter's entry keeps every row folded into it; what the gate counts
// as used is the entry less this one, never below zero. It is present only
// when the counter was reset or credited in its period.
const CreditSuffix = "#credit"

// ReplicaSuffix joins the identity of a budget_usd counter in reserve mode
// and a filter replica id (ledger.Row.Replica): the entry
// id+ReplicaSuffix+<replica> counts the priced nanodollars of that
// replica's rows folded into the counter, in the same period, by the same
// rules. A replica reads its own entry (its spend the accountant has
// already folded) to subtract it from the total and add its own running
// spend instead, which it knows sooner. It is present only when the
// replica's rows added something; rows with no replica id fold into none.
const ReplicaSuffix = "#replica:"

// DistinctSuffix ends the id of an entry that counts how many values of a
// per-value limit's instance (govern.DistinctBase, then this suffix) have
// a counter of their own in the period: at its max_distinct, a value with
// no counter is judged by the instance's overflow counter
// (govern.OverflowIdentity).
const DistinctSuffix = "#distinct"

// Prices carries the price catalog the accountant prices ledger rows with
// (its built-in table and the operator's --pricing file), so the filter can
// bound a call's cost at the same rates. Models maps every name the catalog
// knows exactly, each model's name and each of its aliases, lowercase, to
// its rates: a lookup is an exact match in the map under shared/pricing's
// Lookup rules (date suffix, -latest and provider/ prefix removed), which
// finds what the accountant's catalog finds. Version is a content hash of
// Models (hex SHA-256 of its JSON), so it changes only when a rate or a
// name does.
type Prices struct {
	Version string                `json:"version"`
	Models  map[string]ModelRates `json:"models,omitempty"`
}

// ModelRates are one model's rates in nanodollars per million tokens, as
// shared/pricing.Rates: Input for uncached input tokens, Output for output
// tokens (reasoning included), Cached for input tokens served from the
// prompt cache (0: free; a model with no cached rate of its own carries its
// Input here, and a filter reading an answer without the member bills them
// at Input).
type ModelRates struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
	Cached int64 `json:"cached"`
}

// IngestAck answers an ingest batch.
type IngestAck struct {
	Accepted   int      `json:"accepted"`   // rows newly recorded
	Duplicates int      `json:"duplicates"` // rows already recorded (by request id)
	Rejected   int      `json:"rejected"`   // unreadable rows, with reasons in Errors
	Errors     []string `json:"errors,omitempty"`
	// Kinds are the row kinds the accountant reads (RowKinds): a filter
	// sends start rows and summaries only to an accountant that names
	// them, so one from before them never counts a start as a request.
	Kinds []string `json:"kinds,omitempty"`
}

// RowKinds are the ledger row kinds this accountant reads besides a
// finished request's row (ledger.Kind).
var RowKinds = []string{"start", "summary", "close"}
