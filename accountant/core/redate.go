package core

import (
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// A row's period is picked by its end time, which the gateway's clock
// wrote. A gateway whose clock is wrong (or a caller of the ingest
// endpoint that dates its rows at will) would put its rows in periods
// today's limits never read: yesterday, 2027, 2099. So a live row whose
// end lies more than MaxRowAhead after the accountant's clock, or more
// than MaxRowLag before it, is re-dated: its end becomes now, its start
// moves by the same amount (the call keeps its duration), and the time the
// gateway wrote is kept as GatewayEnd. The row counts in the period in
// which the accountant heard of it, never in one no limit reads. Rows
// before the deduplication horizon are still rejected (a retry that old
// cannot be told from the original). See
// RATIONALE.md#why-does-the-accountant-re-date-a-row-far-from-its-clock.

// redate re-dates r when its end is too far from now; it returns the skew
// found (end − now) and whether it re-dated.
func (c *Core) redate(now time.Time, r *ledger.Row) (time.Duration, bool) {
	skew := r.End.Sub(now)
	ahead, lag := c.opts.MaxRowAhead, c.opts.MaxRowLag
	if (ahead < 0 || skew <= ahead) && (lag < 0 || -skew <= lag) {
		return 0, false
	}
	if !r.Start.IsZero() {
		r.Start = now.Add(-r.End.Sub(r.Start))
	}
	r.GatewayEnd, r.End = r.End, now
	return skew, true
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
