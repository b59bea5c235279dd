package accountant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tokentriage/tokentriage/accountant/core"
	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// closeExpired records, on the heartbeat, the closes of the calls whose
// start the core holds and whose end never came within their lease_ttl
// (core.Expired): like an ingested batch, durable before they count. The
// core's lock is held until they are committed, so no end of the same
// calls is admitted in between: one that comes later replaces the
// estimate (core.Result.Replaced). A close that fails to be written is
// tried again at the next heartbeat.
func (s *Server) closeExpired(now time.Time) {
	s.mu.Lock()
	rows, res, folded, ok := s.closeLocked(now)
	s.mu.Unlock()
	if !ok {
		return
	}
	s.metrics.closed.Add(float64(res.Accepted))
	s.metrics.requests.Add(float64(folded.Requests))
	s.log.Warn("accountant: closed calls whose end never came within their lease_ttl (their proxy died) at their reserved estimate, marked estimated; an end that comes later replaces the estimate",
		"calls", res.Accepted, "first", rows[0].RequestID, "replica", rows[0].Replica)
	s.spendAcknowledged(rows, res)
	s.alerts.emit(folded.Alerts)
}

// closeLocked writes and commits the closes due (s.mu held); ok is false
// when there were none or they failed.
func (s *Server) closeLocked(now time.Time) (rows []ledger.Row, res, folded core.Result, ok bool) {
	rows = s.core.Expired(now)
	if len(rows) == 0 {
		return rows, res, folded, false
	}
	prep := s.core.Prepare(rows, nil)
	tag := s.ledger.Next()
	res = s.core.Admit(now, rows, prep, tag)
	var out []byte
	for i, o := range res.Outcomes {
		if o == core.Accepted {
			out = ledgerlog.AppendRow(out, &rows[i])
		}
	}
	if len(out) == 0 {
		return rows, res, folded, false
	}
	seq, err := s.ledger.Append(out)
	if err == nil && seq != tag {
		err = fmt.Errorf("ledger sequence %d, expected %d", seq, tag)
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = s.ledger.Wait(ctx, seq)
		cancel()
	}
	if err != nil {
		s.core.Abort(tag)
		if !errors.Is(err, ledgerlog.ErrClosed) {
			s.log.Error("accountant: recording the estimated closes of calls whose end never came failed; tried again at the next heartbeat", "calls", res.Accepted, "err", err)
		}
		return rows, res, folded, false
	}
	return rows, res, s.core.Commit(now, tag), true
}
