package accountant

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// QuarantineName is the dead-letter file in the data directory: one JSON
// line per ingested row the accountant can never accept (not a ledger
// row, a row that fails its checks, one older than the deduplication
// horizon), with why. A filter's batch is acknowledged once they are
// written here, so a bad row is never sent again and never holds back
// the rows behind it; the ledger itself only ever holds rows it folds.
const QuarantineName = "quarantine.jsonl"

// MaxQuarantineBytes bounds the dead-letter file; past it rows are still
// quarantined (counted, logged) but no longer written.
const MaxQuarantineBytes = 64 << 20

// maxQuarantinedLine is how much of a quarantined line the file keeps.
const maxQuarantinedLine = 64 << 10

// quarantineLogEvery paces the log lines of quarantined rows.
const quarantineLogEvery = 10 * time.Second

// quarantined is one row of an ingest batch that was not accepted.
type quarantined struct {
	line   int
	reason string
	raw    []byte // the line as it came
}

// quarantineEntry is a line of QuarantineName.
type quarantineEntry struct {
	At      time.Time `json:"at"`
	Replica string    `json:"replica"`
	Line    int       `json:"line"`
	Reason  string    `json:"reason"`
	Bytes   int       `json:"bytes"`
	Row     string    `json:"row"` // the line, cut to maxQuarantinedLine bytes
}

// quarantine appends to the dead-letter file.
type quarantine struct {
	path    string
	log     *slog.Logger
	counter prometheus.Counter

	mu       sync.Mutex
	size     int64
	full     bool
	logged   time.Time
	unlogged int
}

func newQuarantine(dir string, log *slog.Logger, counter prometheus.Counter) *quarantine {
	q := &quarantine{path: filepath.Join(dir, QuarantineName), log: log, counter: counter}
	if st, err := os.Stat(q.path); err == nil {
		q.size = st.Size()
	}
	return q
}

// add writes the rows of one batch to the dead-letter file, durably, logs
// them (at most once per quarantineLogEvery, with the count since) and
// counts them in tt_accountant_rows_quarantined_total. It returns an error
// when the file could not be written: the batch is then answered 503, so
// its filter sends it again.
func (q *quarantine) add(now time.Time, replica string, rows []quarantined) error {
	if len(rows) == 0 {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var buf []byte
	for _, r := range rows {
		raw := r.raw
		if len(raw) > maxQuarantinedLine {
			raw = raw[:maxQuarantinedLine]
		}
		b, err := json.Marshal(quarantineEntry{At: now.UTC(), Replica: replica, Line: r.line, Reason: r.reason, Bytes: len(r.raw), Row: string(raw)})
		if err != nil {
			return err
		}
		buf = append(append(buf, b...), '\n')
	}
	if !q.full && q.size+int64(len(buf)) > MaxQuarantineBytes {
		q.full = true
		q.log.Error("ingest: the quarantine file is full; rows the accountant cannot accept are counted and logged but no longer kept",
			"file", q.path, "bytes", q.size, "max", MaxQuarantineBytes)
	}
	if !q.full {
		if err := q.write(buf); err != nil {
			return fmt.Errorf("ingest: writing %d quarantined rows to %s: %w", len(rows), q.path, err)
		}
		q.size += int64(len(buf))
	}
	q.counter.Add(float64(len(rows)))
	q.unlogged += len(rows)
	if now.Sub(q.logged) >= quarantineLogEvery {
		q.log.Warn("ingest: quarantined rows the accountant can never accept; they are acknowledged, so nothing sends them again, and kept in the quarantine file",
			"rows", q.unlogged, "replica", replica, "first_reason", rows[0].reason, "file", q.path)
		q.logged, q.unlogged = now, 0
	}
	return nil
}

func (q *quarantine) write(b []byte) error {
	f, err := os.OpenFile(q.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
