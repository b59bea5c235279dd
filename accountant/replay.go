package accountant

import (
	"fmt"
	"time"

	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// replayChunk is how many rows are restored into the core at a time.
const replayChunk = 8192

// replay feeds the core every ledger row that ended at or after
// core.ReplayFrom(now): the rows of the current day, ISO week and month and
// of the dedup window, so counters and request ids survive a restart
// exactly. Every row of the files it reads also goes into the spend
// rollup; it returns those files, so the older ones can be summed after
// start (spendHistory). A line that is not a ledger row is skipped with a
// warning (a torn tail was already truncated by ledgerlog.Open).
func (s *Server) replay(now time.Time) ([]string, error) {
	from := s.core.ReplayFrom(now)
	files, err := ledgerlog.Files(s.opts.DataDir, from)
	if err != nil {
		return nil, fmt.Errorf("accountant: replay: %w", err)
	}
	t0 := time.Now()
	var rows, older []ledger.Row
	var reconciles []pendingReconcile
	var read, kept, bad int
	flush := func() {
		s.core.Restore(now, rows) // prices what carries no cost
		s.spend.Add(rows)
		s.spend.Add(older)
		rows, older = rows[:0], older[:0]
	}
	for _, f := range files {
		err := ledgerlog.ScanLines(f, func(line int, b []byte, _ bool) error {
			read++
			r, err := ledgerlog.ParseRow(b)
			if err != nil {
				bad++
				s.log.Warn("replay: skipping a line that is not a ledger row", "file", f, "line", line, "err", err)
				return nil
			}
			if s.redis != nil {
				// The row's tpm reconciles go to Redis again while their
				// windows are open: Redis commits them once by request
				// id, so those it took before the restart change nothing,
				// and those it missed (down, or the process ended first)
				// are not lost.
				if p, ok := s.rowReconcile(&r); ok && p.until.After(now) {
					reconciles = append(reconciles, p)
				}
			}
			if r.End.Before(from) {
				older = append(older, r)
			} else {
				kept++
				rows = append(rows, r)
			}
			if len(rows)+len(older) == replayChunk {
				flush()
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("accountant: replay: %w", err)
		}
	}
	flush()
	if len(reconciles) > 0 {
		s.log.Info("replay: the tpm reconciles of rows whose windows are still open go to Redis again (committed once by request id)", "rows", len(reconciles))
		s.reconcilesLater(reconciles)
	}
	s.log.Info("ledger replayed", "from", from, "files", len(files), "lines", read, "rows", kept, "skipped_bad", bad, "took", time.Since(t0).Round(time.Millisecond))
	return files, nil
}

// backfillLocked hands the core the ledger rows its aggregates lack for
// the plan's periods (core.NeedsHistory): every row since ReplayFrom, of
// which it keeps those it has not. s.mu is held.
func (s *Server) backfillLocked(now time.Time) error {
	if s.ledger == nil {
		s.core.Backfill(nil, true) // before the replay at start, which brings them
		return nil
	}
	from := s.core.ReplayFrom(now)
	files, err := ledgerlog.Files(s.opts.DataDir, from)
	if err != nil {
		return err
	}
	t0 := time.Now()
	var rows []ledger.Row
	n := 0
	for _, f := range files {
		err := ledgerlog.ScanLines(f, func(_ int, b []byte, _ bool) error {
			r, err := ledgerlog.ParseRow(b)
			if err != nil || r.End.Before(from) {
				return nil
			}
			rows = append(rows, r)
			n++
			if len(rows) == replayChunk {
				s.core.Backfill(rows, false)
				rows = rows[:0]
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	s.core.Backfill(rows, true)
	s.log.Info("ledger read again for the plan's new periods", "from", from, "rows", n, "took", time.Since(t0).Round(time.Millisecond))
	return nil
}
