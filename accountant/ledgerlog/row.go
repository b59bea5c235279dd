package ledgerlog

import (
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// ParseRow decodes one line of the ledger or of an ingest batch with
// shared/ledger's strict parser (the wire contract): the row's strings do
// not share memory with line.
func ParseRow(line []byte) (ledger.Row, error) { return ledger.ParseRow(line) }

// AppendRow appends the row's JSON line (shared/ledger's encoding), newline
// included, to dst.
func AppendRow(dst []byte, r *ledger.Row) []byte { return append(r.AppendJSON(dst), '\n') }
