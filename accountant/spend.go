package accountant

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/accountant/core"
	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/accountant/spend"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// spendState is the accountant's side of the spend rollup: whether the
// ledger history older than the replay has been summed yet, and how far
// that has got.
type spendState struct {
	ready      atomic.Bool
	readyCh    chan struct{} // closed once ready
	done, size atomic.Int64  // bytes of history read, of all to read
	err        atomic.Pointer[error]
	stop       chan struct{}
	stopped    chan struct{}
}

// startSpend sums, in the background, the ledger files replay did not
// read (those rotated before the current periods), then merges them into
// the rollup; until then spend reports answer 503 with the progress. The
// rows of the files replay read are in the rollup already, and every row
// acknowledged from now on is enqueued by ingest, so the history is each
// file read once. It also starts the goroutine that folds what ingest
// enqueues.
func (s *Server) startSpend(replayed []string) error {
	all, err := ledgerlog.Files(s.opts.DataDir, time.Time{})
	if err != nil {
		return fmt.Errorf("accountant: spend history: %w", err)
	}
	seen := map[string]bool{}
	for _, f := range replayed {
		seen[f] = true
	}
	var older []string
	for _, f := range all {
		if !seen[f] {
			older = append(older, f)
		}
	}
	st := &s.spendState
	st.stop, st.stopped, st.readyCh = make(chan struct{}), make(chan struct{}), make(chan struct{})
	st.size.Store(ledgerlog.Size(older))
	go s.foldSpend()
	if len(older) == 0 {
		st.ready.Store(true)
		close(st.readyCh)
		return nil
	}
	go func() {
		t0 := time.Now()
		r, bs, err := spend.Build(spend.BuildOptions{
			Ledgers:  [][]string{older},
			Rollup:   spend.Options{HourlyDays: s.opts.SpendHourlyDays},
			Progress: func(done, _ int64) { st.done.Store(done) },
		})
		if err != nil {
			s.log.Error("accountant: spend history: reading the older ledger files failed; spend reports stay unavailable until a restart", "err", err)
			st.err.Store(&err)
			return
		}
		r.Compact(s.now())
		s.spend.Merge(r)
		st.ready.Store(true)
		close(st.readyCh)
		s.log.Info("spend history summed", "files", len(older), "rows", bs.Rows, "skipped_bad", bs.Unreadable, "took", time.Since(t0).Round(time.Millisecond))
	}()
	return nil
}

// foldSpend folds what ingest enqueues into the rollup, so the ingest
// path hands rows over and never waits for a report.
func (s *Server) foldSpend() {
	defer close(s.spendState.stopped)
	for {
		select {
		case <-s.spendState.stop:
			return
		case <-s.spend.Wake():
			s.spend.Fold()
		}
	}
}

// spendAcknowledged hands the rows of an ingest batch that were accepted
// and are now durable to the rollup: it holds acknowledged rows only.
func (s *Server) spendAcknowledged(rows []ledger.Row, res core.Result) {
	if res.Accepted == 0 {
		return
	}
	out := res.Outcomes
	s.spend.Enqueue(rows, func(i int) bool { return out[i] == core.Accepted })
}

// spendReport answers GET /tt/api/v1/spend.
func (s *Server) spendReport(q spend.Query, scope string) (*spend.Report, error) {
	if err := s.spendNotReady(); err != nil {
		return nil, err
	}
	if !q.Local {
		if peers := s.spendPeers(); len(peers) > 1 {
			return spend.FleetRun(context.Background(), q, scope, s.now(), peers, s.plausibility())
		}
	}
	return s.spend.Run(q, scope, s.now())
}

// spendLimits answers GET /tt/api/v1/spend/limits: the live LedgerSettled
// counters beside their amounts.
func (s *Server) spendLimits(scope string) (api.SpendLimits, error) {
	now := s.now()
	s.mu.Lock()
	snap, err := s.core.Snapshot()
	armed := s.armed
	s.mu.Unlock()
	if err != nil {
		return api.SpendLimits{}, err
	}
	return api.SpendLimits{
		GeneratedAt: snap.GeneratedAt.UTC(),
		ReadAt:      now.UTC(),
		Limits:      spend.Limits(armed, snap.Entries, now, scope),
	}, nil
}

// spendNotReady is an *api.NotReadyError while the history is being
// summed.
func (s *Server) spendNotReady() error {
	st := &s.spendState
	if st.ready.Load() {
		return nil
	}
	if e := st.err.Load(); e != nil {
		return fmt.Errorf("accountant: spend history: %w", *e)
	}
	return &api.NotReadyError{What: "the spend history", Done: st.done.Load(), Total: st.size.Load()}
}

// stopSpend stops the fold goroutine.
func (s *Server) stopSpend() {
	if s.spendState.stop != nil {
		close(s.spendState.stop)
		<-s.spendState.stopped
	}
}
