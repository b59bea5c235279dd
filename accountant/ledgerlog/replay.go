package ledgerlog

import "github.com/tokentriage/tokentriage/shared/ledger"

// Progress is how far a read of several ledgers has come: the bytes read
// of Total (Size of the files), reported to Report (nil: not reported)
// once a MiB and at Finish.
type Progress struct {
	Report     func(done, total int64)
	Total      int64
	done, next int64
}

// line counts a line of n bytes and its newline.
func (p *Progress) line(n int) {
	p.done += int64(n) + 1
	if p.Report != nil && p.done >= p.next {
		p.Report(p.done, p.Total)
		p.next = p.done + 1<<20
	}
}

// Finish reports the read whole.
func (p *Progress) Finish() {
	if p.Report != nil {
		p.Report(p.Total, p.Total)
	}
}

// ScanRows calls fn with each ledger row of the file at path, in order,
// and unreadable with each line that is not a row: its number in the file
// (1-based), whether it is a last line without a newline, and why. Every
// line counts toward p.
func ScanRows(path string, p *Progress, unreadable func(n int, torn bool, err error), fn func(n int, row ledger.Row) error) error {
	return ScanLines(path, func(n int, line []byte, torn bool) error {
		p.line(len(line))
		row, err := ParseRow(line)
		if err != nil {
			unreadable(n, torn, err)
			return nil
		}
		return fn(n, row)
	})
}
