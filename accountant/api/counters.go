package api

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// LiveCounters answers GET governance/counters: the LedgerSettled counters
// the accountant publishes to the filters now (the snapshot every gate
// reads), with what that snapshot does not hold yet. `tokentriage govern
// preview --accountant` sets each recomputed figure beside these.
type LiveCounters struct {
	// Plan is the hash of the plan the accountant has armed.
	Plan string `json:"plan"`
	// GeneratedAt is when the snapshot was published (every ingest and
	// every heartbeat); ReadAt when this answer was made; SnapshotAgeS the
	// seconds between them.
	GeneratedAt  time.Time `json:"generated_at"`
	ReadAt       time.Time `json:"read_at"`
	SnapshotAgeS float64   `json:"snapshot_age_s"`
	// Lag is what the counters do not hold yet.
	Lag CountersLag `json:"lag"`
	// Counters are the snapshot's entries: counter identity, the start of
	// the calendar period counted, the value (nanodollars for budget_usd,
	// tokens, requests), and the #unpriced, #estimated and #replica:
	// companions (syncwire).
	Counters []syncwire.Entry `json:"counters"`
}

// CountersLag discloses what the live counters are behind by.
type CountersLag struct {
	// UnfoldedRows are rows the accountant acknowledged and has not folded:
	// always 0 here, since a batch is folded before it is acknowledged.
	UnfoldedRows int64 `json:"unfolded_rows"`
	// DroppedRows are the rows the filters report having dropped (their
	// buffers overflowed), summed over replicas: never counted.
	DroppedRows int64 `json:"dropped_rows"`
	// ReplicasLive are the filter replicas that polled within the
	// liveness window.
	ReplicasLive int    `json:"replicas_live"`
	Note         string `json:"note"`
}

// CountersLagNote is the note of every GET governance/counters answer.
const CountersLagNote = "rows a filter has not flushed yet (at most its flush_interval of traffic, and requests still in flight or streaming) are in no counter; dropped_rows never will be"

func (h *handler) getCounters(w http.ResponseWriter, r *http.Request, _ principal) {
	if h.Counters == nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "this accountant does not publish its counters")
		return
	}
	c, err := h.Counters()
	if err != nil {
		h.internal(w, r, err)
		return
	}
	c.ReadAt = h.Now().UTC()
	if !c.GeneratedAt.IsZero() {
		c.GeneratedAt = c.GeneratedAt.UTC()
		c.SnapshotAgeS = max(0, c.ReadAt.Sub(c.GeneratedAt).Seconds())
	}
	if c.Counters == nil {
		c.Counters = []syncwire.Entry{}
	}
	c.Lag.UnfoldedRows = 0
	c.Lag.Note = CountersLagNote
	writeJSON(w, http.StatusOK, c)
}

// Counters reads the live LedgerSettled counters (admin token only).
func (c *Client) Counters(ctx context.Context) (LiveCounters, error) {
	var out LiveCounters
	err := c.do(ctx, http.MethodGet, "governance/counters", nil, nil, &out)
	if err == nil && out.ReadAt.IsZero() {
		err = c.notAnAnswer(http.MethodGet, "governance/counters", "it has no read_at")
	}
	return out, err
}

// CounterRequest is the body of POST counters/reset and counters/credit:
// the counter of limit LimitID at Node (a tree node, or a key's node
// <owner>/key:<kid> for a key-level limit), in its current period. Dims
// name the counter of a limit kept per model, provider or endpoint (its
// match has a value for them: a model pattern needs dims.model, an exact
// match is taken as it is). A credit takes Amount (a count of tokens or
// requests) or AmountUSD (dollars, for budget_usd) off the counter; a
// reset takes all it holds.
type CounterRequest struct {
	LimitID   string            `json:"limit_id"`
	Node      string            `json:"node"`
	Dims      map[string]string `json:"dims,omitempty"`
	Amount    *int64            `json:"amount,omitempty"`
	AmountUSD *config.USD       `json:"amount_usd,omitempty"`
}

// CounterAdjusted answers a reset or a credit: the counter, what it held
// before, what was taken off and what it holds now, in the limit's unit
// (dollars as exact decimals for budget_usd), and who did it when.
type CounterAdjusted struct {
	Kind        string            `json:"kind"`
	LimitID     string            `json:"limit_id"`
	LimitType   string            `json:"limit_type"`
	Node        string            `json:"node"`
	Dims        map[string]string `json:"dims,omitempty"`
	Counter     string            `json:"counter"`
	Period      string            `json:"period"`
	PeriodStart time.Time         `json:"period_start"`
	ResetsAt    time.Time         `json:"resets_at"`
	Unit        string            `json:"unit"`
	Before      json.Number       `json:"before"`
	Taken       json.Number       `json:"taken"`
	After       json.Number       `json:"after"`
	At          time.Time         `json:"at"`
	Who         string            `json:"who"`
	Note        string            `json:"note"`
}

// CounterNote is the note of every CounterAdjusted.
const CounterNote = "recorded in governance.db with the runtime plane (audited, kept across restarts and ledger replays, mirrored to every accountant of a fleet); " +
	"the gateways count it from their next sync; the rows stay in the ledger and in spend reports, and calls in flight when it was taken count when they settle"

func (h *handler) resetCounter(w http.ResponseWriter, r *http.Request, p principal) {
	h.adjustCounter(w, r, p, runtime.AdjustReset)
}

func (h *handler) creditCounter(w http.ResponseWriter, r *http.Request, p principal) {
	h.adjustCounter(w, r, p, runtime.AdjustCredit)
}

// adjustCounter records a reset or a credit of one counter (see
// CounterRequest), under the rules of overrides: a delegated admin adjusts
// only counters of nodes below its scope.
func (h *handler) adjustCounter(w http.ResponseWriter, r *http.Request, p principal, kind string) {
	var req CounterRequest
	if !decodeBody(w, r, &req) || !overrideNodeParam(w, "node", req.Node) || !p.mayWrite(w, "node", req.Node) {
		return
	}
	a := h.Armed()
	if a == nil {
		h.armed(w)
		return
	}
	l := a.Plan.Limit(req.LimitID)
	switch {
	case l == nil:
		writeError(w, http.StatusNotFound, "not_found", "limit %q is not armed; GET %sgovernance/limits lists the armed limit ids", req.LimitID, Prefix)
		return
	case l.Type.Class() != govern.LedgerSettled || !l.Period.Counted():
		writeError(w, http.StatusBadRequest, "invalid_request",
			"limit %q is %s: only the counters of budget_usd, quota_tokens and quota_requests limits are reset or credited (a rate window refills on its own)", l.ID, l.Type)
		return
	case l.Period.Rolling > 0:
		writeError(w, http.StatusBadRequest, "invalid_request",
			"limit %q counts a rolling window (%s) of day buckets that slide out on their own: a reset or a credit takes off one calendar period's counter, so it applies to calendar periods only", l.ID, l.Period)
		return
	}
	if !instanceOf(a, l, req.Node) {
		writeError(w, http.StatusNotFound, "not_found", "limit %q has no instance at %q; spend/limits lists the instances with their counters", l.ID, req.Node)
		return
	}
	d, ok := counterDims(w, l, req.Dims)
	if !ok {
		return
	}
	var credit int64
	if kind == runtime.AdjustCredit {
		switch {
		case l.Type == govern.BudgetUSD && req.AmountUSD != nil && req.Amount == nil:
			credit = req.AmountUSD.Nanos
		case l.Type != govern.BudgetUSD && req.Amount != nil && req.AmountUSD == nil:
			credit = *req.Amount
		case l.Type == govern.BudgetUSD:
			writeError(w, http.StatusBadRequest, "invalid_request", "limit %q is budget_usd: send amount_usd, the dollars to give back (for example 5 or 0.25)", l.ID)
			return
		default:
			writeError(w, http.StatusBadRequest, "invalid_request", "limit %q is %s: send amount, the %s to give back", l.ID, l.Type, l.Type.Unit())
			return
		}
		if credit <= 0 {
			writeError(w, http.StatusBadRequest, "invalid_request", "the amount to credit must be more than 0")
			return
		}
	} else if req.Amount != nil || req.AmountUSD != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "a reset takes the whole counter and no amount; to give back part of it, POST %scounters/credit", Prefix)
		return
	}
	if h.Counters == nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "this accountant does not publish its counters")
		return
	}
	if h.FleetRead != nil {
		h.FleetRead()
	}
	live, err := h.Counters()
	if err != nil {
		h.internal(w, r, err)
		return
	}
	now := h.Now()
	id := govern.Identity(l, req.Node, d)
	start, end := l.Period.Start(now), l.Period.End(now)
	// The snapshot serves the counter less what was taken off it before.
	var before int64
	for _, e := range live.Counters {
		if e.ID == id && e.PeriodStart.Equal(start) {
			before = max(0, e.Value)
		}
	}
	taken := before
	if kind == runtime.AdjustCredit {
		taken = min(credit, before)
	}
	out := CounterAdjusted{Kind: kind, LimitID: l.ID, LimitType: l.Type.String(), Node: req.Node, Dims: dimsOf(l, d), Counter: id,
		Period: l.Period.String(), PeriodStart: start, ResetsAt: end, Unit: l.Type.Unit(),
		Before: counterNumber(l.Type, before), Taken: counterNumber(l.Type, taken), After: counterNumber(l.Type, before-taken),
		At: now.UTC(), Who: p.who, Note: CounterNote}
	if taken == 0 {
		out.Note = "the counter holds nothing in this period: nothing was taken off and nothing recorded"
		writeJSON(w, http.StatusOK, out)
		return
	}
	// The adjustment names a period in a time zone with its zone, so the
	// accountant keys it as it keys the counter (adjustedKey).
	period := out.Period
	if l.Period.Zone != "" {
		period += "@" + l.Period.Zone
	}
	_, err = h.DB.AdjustCounter(runtime.Adjustment{Kind: kind, LimitID: l.ID, Node: req.Node, Counter: id, Period: period,
		PeriodStart: start, PeriodEnd: end, Amount: taken, Before: before}, runtime.Stamp{Who: p.who, At: now})
	if err != nil {
		h.writeRefusal(w, r, err)
		return
	}
	h.wrote(p, "counter."+kind, id)
	writeJSON(w, http.StatusOK, out)
}

// instanceOf reports whether l has an instance at node: a key's node for
// a key-level template, one of its tree nodes otherwise.
func instanceOf(a *govern.Armed, l *govern.Limit, node string) bool {
	if _, _, ok := govern.SplitKeyLeaf(node); ok {
		return l.Level == govern.LevelKey
	}
	return slices.Contains(a.Instances(l), node)
}

// counterDims reads the dims that name one counter of l: each dim l
// matches on takes the request's value, or l's own when it is exact;
// a model pattern needs a model it matches.
func counterDims(w http.ResponseWriter, l *govern.Limit, in map[string]string) (govern.Dims, bool) {
	for k := range in {
		if k != "model" && k != "provider" && k != "endpoint" {
			writeError(w, http.StatusBadRequest, "invalid_request", "dims.%s: a counter is kept per model, provider or endpoint only", k)
			return govern.Dims{}, false
		}
		if (k == "model" && l.Match.Model == "") || (k == "provider" && l.Match.Provider == "") || (k == "endpoint" && l.Match.Endpoint == "") {
			writeError(w, http.StatusBadRequest, "invalid_request", "dims.%s: limit %q has one counter for every %s (its match names none); leave dims.%s out", k, l.ID, k, k)
			return govern.Dims{}, false
		}
	}
	d := govern.Dims{Model: in["model"], Provider: in["provider"], Endpoint: in["endpoint"]}
	if d.Provider == "" {
		d.Provider = l.Match.Provider
	}
	if d.Endpoint == "" {
		d.Endpoint = l.Match.Endpoint
	}
	glob := strings.ContainsAny(l.Match.Model, `*?[\`)
	if d.Model == "" && l.Match.Model != "" {
		if glob {
			writeError(w, http.StatusBadRequest, "invalid_request",
				"limit %q keeps one counter per model matching %q: name the model in dims.model (spend/limits lists the counters)", l.ID, l.Match.Model)
			return govern.Dims{}, false
		}
		d.Model = l.Match.Model
	}
	if !l.Matches(d) {
		writeError(w, http.StatusBadRequest, "invalid_request", "dims %v do not match limit %q (match: model %q, provider %q, endpoint %q)",
			in, l.ID, l.Match.Model, l.Match.Provider, l.Match.Endpoint)
		return govern.Dims{}, false
	}
	return d, true
}

// dimsOf is the dims a counter of l is kept per, as the API shows them.
func dimsOf(l *govern.Limit, d govern.Dims) map[string]string {
	out := map[string]string{}
	if l.Match.Model != "" {
		out["model"] = d.Model
	}
	if l.Match.Provider != "" {
		out["provider"] = d.Provider
	}
	if l.Match.Endpoint != "" {
		out["endpoint"] = d.Endpoint
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// counterNumber is a counter's value in its limit's unit.
func counterNumber(t govern.Type, v int64) json.Number { return json.Number(t.FormatAmount(v)) }

// ResetCounter takes a counter back to zero in its current period.
func (c *Client) ResetCounter(ctx context.Context, req CounterRequest) (CounterAdjusted, error) {
	return c.adjust(ctx, "counters/reset", req)
}

// CreditCounter gives back part of a counter in its current period.
func (c *Client) CreditCounter(ctx context.Context, req CounterRequest) (CounterAdjusted, error) {
	return c.adjust(ctx, "counters/credit", req)
}

func (c *Client) adjust(ctx context.Context, route string, req CounterRequest) (CounterAdjusted, error) {
	var out CounterAdjusted
	err := c.do(ctx, http.MethodPost, route, nil, req, &out)
	if err == nil && (out.Counter == "" || out.Kind == "") {
		err = c.notAnAnswer(http.MethodPost, route, "it names no counter")
	}
	return out, err
}
