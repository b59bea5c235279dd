package api

import (
	"context"
	"net/http"
	"time"

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
