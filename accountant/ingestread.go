package accountant

import (
	"bytes"
	"errors"
	"runtime"
	"sync"

	"github.com/tokentriage/tokentriage/accountant/core"
	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// batchRead is a batch of ingest lines parsed, validated, priced and
// encoded for the ledger: everything of a batch that happens outside the
// core's lock.
type batchRead struct {
	lines    [][]byte // the batch's non-empty lines (slices of the body)
	rows     []ledger.Row
	prep     []core.Prepared
	lineErrs []lineError // lines that are not rows, by line number
	lineOf   []int       // the line number of each row
	buf      *[]byte     // each row's ledger line, back to back (pooled)
	ends     []int       // end offset of each row's line in *buf
}

// parallelLines is the fewest lines per part worth a goroutine of its own.
const parallelLines = 128

// readBatch reads body, one ledger row per non-empty line. This is most of
// a batch's CPU, and a filter VM sends its next batch only once the last is
// acknowledged, so a large batch is cut into parts read on every core at
// once: one sender's batches are acknowledged sooner, not only many
// senders' (see RATIONALE.md#why-does-the-accountant-read-one-batch-on-every-core).
// The parts are joined in line order; the result is what one pass gives.
func (s *Server) readBatch(body []byte) batchRead {
	var lines [][]byte
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			lines = append(lines, line)
		}
	}
	parts := min(runtime.GOMAXPROCS(0), len(lines)/parallelLines)
	if parts <= 1 {
		b := s.readLines(lines, 1)
		b.lines = lines
		return b
	}
	reads := make([]batchRead, parts)
	var wg sync.WaitGroup
	for p := range reads {
		from, to := p*len(lines)/parts, (p+1)*len(lines)/parts
		wg.Add(1)
		go func() {
			defer wg.Done()
			reads[p] = s.readLines(lines[from:to], from+1)
		}()
	}
	wg.Wait()
	out := reads[0]
	out.lines = lines
	for _, r := range reads[1:] {
		base := len(*out.buf)
		*out.buf = append(*out.buf, *r.buf...)
		putBuf(r.buf)
		out.rows = append(out.rows, r.rows...)
		out.prep = append(out.prep, r.prep...)
		out.lineErrs = append(out.lineErrs, r.lineErrs...)
		out.lineOf = append(out.lineOf, r.lineOf...)
		for _, e := range r.ends {
			out.ends = append(out.ends, base+e)
		}
	}
	return out
}

// readLines reads lines, numbered from first, into rows and their ledger
// lines.
func (s *Server) readLines(lines [][]byte, first int) batchRead {
	b := batchRead{rows: make([]ledger.Row, 0, len(lines))}
	size := 0
	for i, line := range lines {
		size += len(line) + 1
		row, err := ledgerlog.ParseRow(line)
		if err == nil && row.Kind == ledger.KindClose {
			err = errors.New("kind close: a close is the accountant's own row, written when a call's end never came; a filter sends starts, ends and summaries")
		}
		if err != nil {
			b.lineErrs = append(b.lineErrs, lineError{first + i, err.Error()})
			continue
		}
		b.rows = append(b.rows, row)
		b.lineOf = append(b.lineOf, first+i)
	}
	// A row's cost, and the estimate it replaces, are the accountant's to
	// set: whatever a sender put there (the filter sends neither) is priced
	// again from the catalog, so an unknown model is UNPRICED, never a $0
	// someone wrote. Every member is held to its bound (ledger.Row.Bound),
	// whatever wrote the row, so no ledger line is unbounded.
	for i := range b.rows {
		b.rows[i].Cost, b.rows[i].Replaced = nil, nil
		b.rows[i].Bound()
	}
	b.prep = s.core.Prepare(b.rows, nil)
	b.buf = getBuf() // back to the pool only once the ledger wrote it
	if need := size + size/4 + 64*len(b.rows); cap(*b.buf) < need {
		*b.buf = make([]byte, 0, need) // a row grows by its cost when encoded
	}
	b.ends = make([]int, len(b.rows))
	for i := range b.rows {
		if b.prep[i].Err() == nil {
			*b.buf = ledgerlog.AppendRow(*b.buf, &b.rows[i])
		}
		b.ends[i] = len(*b.buf)
	}
	return b
}
