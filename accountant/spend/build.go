package spend

import (
	"fmt"
	"path/filepath"

	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/accountant/pricing"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// BuildOptions are the inputs of Build.
type BuildOptions struct {
	// Ledgers are the ledgers to read, each as its files oldest first
	// (ledgerlog.FilesFor): one per accountant of a fleet.
	Ledgers [][]string
	// Pricing prices a forwarded row recorded without a cost (the
	// accountant prices every row it records, so only a ledger written by
	// something else has one). Nil: the built-in catalog.
	Pricing *pricing.Catalog
	// Rollup configures the rollup built.
	Rollup Options
	// Progress, when set, is told the bytes read so far out of the total.
	Progress func(done, total int64)
	// Unreadable, when set, is told each line that is not a ledger row: its
	// file, its line number, whether it is a last line without a newline,
	// and why it does not parse. The line is skipped and counted.
	Unreadable func(file string, line int, torn bool, err error)
}

// BuildStats say what Build read.
type BuildStats struct {
	Ledgers int
	Files   int
	// Rows are the rows summed; Duplicates the rows skipped because a
	// ledger read before held their request id; Unreadable the lines that
	// are not ledger rows.
	Rows, Duplicates, Unreadable int64
}

// Build reads ledgers into a new Rollup. With several ledgers (a fleet
// keeps one per accountant) a row is counted once by its request id,
// whichever ledgers hold it, so the report over all of them is exact even
// when a retried batch reached two accountants: the first copy read is
// kept. That check holds the request ids of every ledger but the last in
// memory (16 bytes each, about 40 with the map); one ledger is read
// without it, since an accountant records a request id once. A file named
// by two ledgers is read once.
func Build(o BuildOptions) (*Rollup, BuildStats, error) {
	cat := o.Pricing
	if cat == nil {
		cat = pricing.Default()
	}
	r := New(o.Rollup)
	st := BuildStats{Ledgers: len(o.Ledgers)}
	var seen map[[17]byte]struct{}
	if len(o.Ledgers) > 1 {
		seen = map[[17]byte]struct{}{}
	}
	read := map[string]bool{}
	var all []string
	for _, files := range o.Ledgers {
		for _, f := range files {
			all = append(all, f)
		}
	}
	progress := ledgerlog.Progress{Report: o.Progress, Total: ledgerlog.Size(all)}
	const chunk = 8192
	rows := make([]ledger.Row, 0, chunk)
	for i, files := range o.Ledgers {
		last := i == len(o.Ledgers)-1
		for _, f := range files {
			abs, err := filepath.Abs(f)
			if err != nil {
				abs = f
			}
			if read[abs] {
				continue
			}
			read[abs] = true
			st.Files++
			unreadable := func(n int, torn bool, err error) {
				st.Unreadable++
				if o.Unreadable != nil {
					o.Unreadable(f, n, torn, err)
				}
			}
			err = ledgerlog.ScanRows(f, &progress, unreadable, func(n int, row ledger.Row) error {
				if seen != nil {
					id, ok := row.Key()
					if !ok {
						return fmt.Errorf("%s line %d: request_id %q is not a request id", f, n, row.RequestID)
					}
					if _, dup := seen[id]; dup {
						st.Duplicates++
						return nil
					}
					if !last {
						seen[id] = struct{}{}
					}
				}
				if row.Cost == nil && row.Decision.Folded() && row.Kind != ledger.KindStart {
					p := cat.PriceRow(&row)
					row.Cost = &ledger.Cost{Nanos: p.Nanos, Unpriced: p.Unpriced, Estimated: row.Estimated.Input || row.Estimated.Output}
				}
				rows = append(rows, row)
				st.Rows++
				if len(rows) == chunk {
					r.Add(rows)
					rows = rows[:0]
				}
				return nil
			})
			if err != nil {
				return nil, st, err
			}
		}
	}
	r.Add(rows)
	progress.Finish()
	return r, st, nil
}
