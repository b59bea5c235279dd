// Package syncwire owns the wire between the filter and the accountant:
// GET /tt/internal/v1/sync and POST /tt/internal/v1/ingest.
//
// The filter polls sync with the plan and price versions it holds and a
// cursor into each change feed (the runtime plane's and the spend
// snapshot's); the accountant answers the plan and prices whole only when
// their version differs, and a page of each feed after its cursor, so a
// filter that is current gets a small answer, and a mint, a revocation or
// a counter that moved is sent as that change, never as the table.
//
//	GET /tt/internal/v1/sync?plan=P&prices=C&runtime=CURSOR&snapshot=CURSOR&page=BYTES&replica=ID
//
// Ingest takes a batch of ledger rows as JSON lines (one ledger.Row per line)
// and answers 200 with an IngestAck once every row is durable.
package syncwire

import (
	"strconv"
	"strings"
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

// Sync is the answer to a sync poll. The plan and the price catalog, which
// grow with the config, are sent whole when the filter's version differs
// and as their version alone when it is current. The runtime plane (keys,
// nodes, overrides) and the spend snapshot, which grow with the tenants,
// are change feeds: each answer carries one page of what changed after
// the cursor the filter sent, bounded in bytes (Page).
type Sync struct {
	Plan     Plan         `json:"plan"`
	Prices   Prices       `json:"prices"`
	Runtime  RuntimePage  `json:"runtime"`
	Snapshot SnapshotPage `json:"snapshot"`
	// Replicas is the number of filter replicas (host processes) that
	// polled within the liveness window; store: share divides by it.
	Replicas int `json:"replicas"`
	// Redis is set when the accountant has the fleet's shared Redis:
	// reserve mode and concurrency under store: share then decide on
	// leases of the fleet's amount (LeasePath), and when Redis cannot
	// decide, past the lease, within the replica's share, saying
	// suspended.
	Redis bool `json:"redis,omitempty"`
}

// Plan carries the accountant's governance block. Version is the plan hash.
type Plan struct {
	Version    string             `json:"version"`
	Governance *config.Governance `json:"governance,omitempty"`
}

// A feed is a compacted change log: every item (a key, a node, an
// override, a counter) carries the sequence number of its last change, and
// a page lists, in sequence order, the items whose last change is after
// the filter's cursor, each in its current state (or Gone). Replaying the
// pages from any cursor of the feed's ID therefore brings a copy up to
// date, and from the empty cursor builds it whole.
//
// A cursor is the feed's ID, a dot and a sequence number. A cursor of
// another ID (another governance.db, an accountant restarted) or one the
// feed can no longer serve (it forgot removals past it) is answered from
// the start with Reset set: the filter then builds a new copy from the
// pages that follow and drops its old one when the last page (More unset)
// is in. The cursor of the answer's last page is current.
type Page struct {
	// Cursor is the cursor to send next: the feed's position after this
	// page.
	Cursor string `json:"cursor"`
	// Reset: this page starts the feed from its beginning; what the
	// filter held before is replaced by what these pages bring.
	Reset bool `json:"reset,omitempty"`
	// More: the page was cut at its byte bound and more follows; ask again
	// at once with Cursor.
	More bool `json:"more,omitempty"`
}

// DefaultPageBytes bounds a feed page when the poll names no bound;
// MinPageBytes and MaxPageBytes clamp the page= a poll asks for. A page
// always carries at least one item, however large.
const (
	DefaultPageBytes = 256 << 10
	MinPageBytes     = 4 << 10
	MaxPageBytes     = 4 << 20
)

// RuntimePage is one page of the runtime plane's feed: the keys, the
// runtime nodes and the per-node overrides that changed after the cursor.
type RuntimePage struct {
	Page
	Keys      []Key      `json:"keys,omitempty"`
	Nodes     []Node     `json:"nodes,omitempty"`
	Overrides []Override `json:"overrides,omitempty"`
}

// Key is one minted virtual key (its hash, never the key).
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
	// Gone: the key no longer exists (its database was replaced).
	Gone bool `json:"gone,omitempty"`
}

// Node is one node of the runtime plane's tree. Tree says whether it is a
// node of the tree now: created through the management API, or above such
// a node. A node deleted, with nothing under it, comes with Tree false.
type Node struct {
	ID   string `json:"id"`
	Tree bool   `json:"tree"`
}

// Override replaces the amount of one instance of a spend or quota limit.
// Amount is a count, or nanodollars for budget_usd. Gone: the override was
// deleted and the instance returns to its template's amount.
type Override struct {
	LimitID string `json:"limit_id"`
	Node    string `json:"node"`
	Amount  int64  `json:"amount"`
	Gone    bool   `json:"gone,omitempty"`
}

// SnapshotPage is one page of the spend snapshot's feed: the counters
// whose value moved after the cursor, and the counters removed (their
// period ended, or a re-derivation dropped them). GeneratedAt and Fleet
// are the snapshot's as of this answer, on every page: GeneratedAt is
// refreshed by the accountant's heartbeat even when nothing moved.
type SnapshotPage struct {
	Page
	GeneratedAt time.Time `json:"generated_at"`
	// Fleet: see Snapshot.Fleet.
	Fleet   string   `json:"fleet,omitempty"`
	Entries []Entry  `json:"entries,omitempty"`
	Removed []string `json:"removed,omitempty"`
}

// Snapshot is every LedgerSettled instance's counter for its current
// calendar period, as the accountant's core holds it (the sync wire sends
// it as a feed, SnapshotPage). GeneratedAt is refreshed by the
// accountant's heartbeat.
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

// SlideSuffix and ResetsSuffix end the ids of a rolling window's companion
// entries (period: 30d): the entry itself counts every day bucket of the
// window but the oldest, id+SlideSuffix the oldest (of which the gateway
// counts the share still inside the window), and id+ResetsSuffix, while
// the window is over its amount, the Unix second it falls under it. The
// three carry the start of the bucket holding now.
const (
	SlideSuffix  = "#slide"
	ResetsSuffix = "#resets"
)

// DistinctSuffix ends the id of an entry that counts how many values of a
// per-value limit's instance (govern.DistinctBase, then this suffix) have
// a counter of their own in the period: at its max_distinct, a value with
// no counter is judged by the instance's overflow counter
// (govern.OverflowIdentity).
const DistinctSuffix = "#distinct"

// FullestSuffix ends the id of an entry the accountant adds for a spend or
// quota limit counted per value (a model, customer or tag pattern, so each
// value has its own counter): the largest of those counters at one node in
// the current period. Its id is the instance's govern.DistinctBase, then
// FullestSuffix; /tt/v1/me shows it when the caller names no value,
// without listing every value's counter.
const FullestSuffix = "#fullest"

// FormatCursor renders a feed cursor: the feed's id, a dot, a sequence
// number.
func FormatCursor(id string, seq uint64) string { return id + "." + strconv.FormatUint(seq, 10) }

// ParseCursor splits a feed cursor into the feed's id and the sequence
// number; ok is false for anything else (the empty cursor of a filter
// that holds nothing, or one it made up).
func ParseCursor(c string) (id string, seq uint64, ok bool) {
	i := strings.LastIndexByte(c, '.')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(c[i+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return c[:i], n, true
}

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
