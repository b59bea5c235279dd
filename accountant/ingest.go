package accountant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"

	"github.com/tokentriage/tokentriage/accountant/core"
	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

type coreAlert = core.Alert

// serveIngest takes a batch of ledger rows as JSON lines and answers an
// IngestAck once every accepted row is durable. Unreadable rows are
// rejected one by one with their reasons; the rest of the batch is
// recorded. A filter may report its overflow count with ?replica=ID&dropped=N
// (cumulative), as on sync.
func (s *Server) serveIngest(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, MaxIngestBytes, fmt.Sprintf("ingest: batch is larger than %d bytes; send smaller batches", MaxIngestBytes), "ingest: reading the batch")
	if !ok {
		return
	}
	s.noteReplica(r, false)
	replica := r.URL.Query().Get("replica")
	if len(replica) > 256 {
		replica = replica[:256]
	}
	ack, status, err := s.ingestLines(r.Context(), body, replica)
	if err != nil {
		writeError(w, status, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(ack)
}

// IngestLines records one batch of JSON lines (one ledger.Row each) and
// returns after every accepted row, and every row the batch duplicates, is
// on disk. The int is the HTTP status to answer with when err is set.
func (s *Server) IngestLines(ctx context.Context, body []byte) (syncwire.IngestAck, int, error) {
	return s.ingestLines(ctx, body, "")
}

// ingestLines is IngestLines for the named replica (the quarantine file
// names it).
func (s *Server) ingestLines(ctx context.Context, body []byte, replica string) (syncwire.IngestAck, int, error) {
	ack := syncwire.IngestAck{Kinds: syncwire.RowKinds}
	b := s.readBatch(body)
	rows, prep, lineErrs, lineOf, buf, ends := b.rows, b.prep, b.lineErrs, b.lineOf, b.buf, b.ends

	now := s.now()
	s.mu.Lock()
	tag := s.ledger.Next()
	res := s.core.Admit(now, rows, prep, tag)
	out := *buf
	if res.Accepted != len(rows) && res.Accepted > 0 || res.Redated > 0 || len(res.Replaced) > 0 {
		// Keep only the accepted rows' lines (duplicates are not written),
		// the rows the core re-dated as they now read, and those of late
		// ends with the estimate they replace.
		replaced := map[int]bool{}
		for _, i := range res.Replaced {
			replaced[i] = true
		}
		out = out[:0:0]
		for i, o := range res.Outcomes {
			switch {
			case o != core.Accepted:
			case replaced[i] || !rows[i].GatewayEnd.IsZero():
				out = ledgerlog.AppendRow(out, &rows[i])
			default:
				start := 0
				if i > 0 {
					start = ends[i-1]
				}
				out = append(out, (*buf)[start:ends[i]]...)
			}
		}
	}
	var seq uint64
	var appendErr error
	if res.Accepted > 0 {
		seq, appendErr = s.ledger.Append(out)
		if appendErr != nil {
			s.core.Abort(tag)
		}
	}
	s.mu.Unlock()
	if res.Redated > 0 {
		s.noteRedated(res)
	}
	if appendErr != nil {
		return ack, http.StatusServiceUnavailable, appendErr
	}
	if seq != 0 && seq != tag {
		// Only the ingest path appends, under s.mu; a mismatch would mean
		// a duplicate could be acknowledged before its original is durable.
		s.settle(seq, errors.New("ledger sequence mismatch"))
		return ack, http.StatusInternalServerError, fmt.Errorf("ingest: ledger sequence %d, expected %d", seq, tag)
	}
	// The rows reach the counters only once the ledger holds them: Commit
	// folds them after the fsync, Abort forgets them when it failed.
	werr := s.ledger.Wait(ctx, seq)
	if werr != nil && ctx.Err() != nil && errors.Is(werr, ctx.Err()) {
		// The sender left; the commit still ends one way or the other.
		go func() {
			werr := s.ledger.Wait(context.Background(), seq)
			s.settle(seq, werr)
			if werr == nil {
				s.rowsAcknowledged(rows, res)
				s.spendAcknowledged(rows, res)
				s.reconcileAcknowledged(rows, res)
			}
		}()
		return ack, http.StatusServiceUnavailable, fmt.Errorf("ingest: the batch is not durable yet: %w", werr)
	}
	folded := s.settle(seq, werr)
	s.metrics.observeIngest(res, folded, len(lineErrs), s.now())
	if werr != nil {
		return ack, http.StatusServiceUnavailable, fmt.Errorf("ingest: the batch is not durable: %w", werr)
	}
	// Durable: now, and only now, the rows count in spend reports, and
	// their tpm reconciles reach the fleet's Redis.
	s.rowsAcknowledged(rows, res)
	s.spendAcknowledged(rows, res)
	s.reconcileAcknowledged(rows, res)
	if res.WaitTag != 0 && res.WaitTag != seq {
		// A duplicate is acknowledged only once the batch that recorded it
		// is durable; if that commit failed, so does this answer, and the
		// retry records the row afresh.
		if err := s.ledger.Wait(ctx, res.WaitTag); err != nil {
			return ack, http.StatusServiceUnavailable, fmt.Errorf("ingest: the batch repeats rows of another that is not durable: %w", err)
		}
	}
	putBuf(buf)

	ack.Accepted = res.Accepted
	ack.Duplicates = res.Duplicates
	ack.Rejected = res.Rejected + len(lineErrs)
	for _, r := range res.Reasons {
		lineErrs = append(lineErrs, lineError{lineOf[r.Index], r.Message})
	}
	sort.Slice(lineErrs, func(i, j int) bool { return lineErrs[i].line < lineErrs[j].line })
	if len(lineErrs) > 0 {
		// Rows the accountant can never accept go to the dead-letter file,
		// durably, before the batch is acknowledged.
		q := make([]quarantined, len(lineErrs))
		for i, e := range lineErrs {
			q[i] = quarantined{line: e.line, reason: e.msg, raw: b.lines[e.line-1]}
		}
		if err := s.quarantine.add(now, replica, q); err != nil {
			return syncwire.IngestAck{}, http.StatusServiceUnavailable, err
		}
	}
	for _, e := range lineErrs {
		ack.Errors = append(ack.Errors, fmt.Sprintf("line %d: %s", e.line, e.msg))
	}
	return ack, http.StatusOK, nil
}

// settle ends the admission of the rows written under seq (0: none): a
// durable commit (err nil) folds them into the counters and raises their
// alerts, a failed one forgets them so their retry counts afresh. It
// returns the commit's result.
func (s *Server) settle(seq uint64, err error) core.Result {
	if seq == 0 {
		return core.Result{}
	}
	s.mu.Lock()
	var res core.Result
	if err == nil {
		res = s.core.Commit(s.now(), seq)
	} else {
		s.core.Abort(seq)
	}
	s.mu.Unlock()
	s.alerts.emit(res.Alerts)
	return res
}

// lineError is why one line of a batch was rejected.
type lineError struct {
	line int
	msg  string
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"message": msg}})
}

// readBody reads r's body, at most max bytes. A longer one is answered
// 413 with tooLarge, one that cannot be read 400 with reading and the
// cause; then ok is false and the answer is written.
func readBody(w http.ResponseWriter, r *http.Request, max int64, tooLarge, reading string) (body []byte, ok bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, tooLarge)
			return nil, false
		}
		writeError(w, http.StatusBadRequest, reading+": "+err.Error())
		return nil, false
	}
	return body, true
}

// readJSON reads r's body, at most max bytes (a longer one is an
// *http.MaxBytesError), into v.
func readJSON(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

func getBuf() *[]byte { b := bufPool.Get().(*[]byte); *b = (*b)[:0]; return b }

// putBuf returns a buffer once the ledger has written it (after Wait).
func putBuf(b *[]byte) {
	if cap(*b) <= 8<<20 {
		bufPool.Put(b)
	}
}

// rowsAcknowledged hands the rows newly recorded to Options.OnRows.
func (s *Server) rowsAcknowledged(rows []ledger.Row, res core.Result) {
	if s.opts.OnRows == nil || res.Accepted == 0 {
		return
	}
	acc := make([]ledger.Row, 0, res.Accepted)
	for i, o := range res.Outcomes {
		if o == core.Accepted {
			acc = append(acc, rows[i])
		}
	}
	s.opts.OnRows(acc)
}

// KeyNames returns the names of the keys kids that have one, by kid.
func (s *Server) KeyNames(kids []string) (map[string]string, error) { return s.db.KeyNames(kids) }
