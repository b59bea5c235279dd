package ledgerlog

import (
	"encoding/json"
	"fmt"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// ParseRow decodes one line of the ledger (or of an ingest batch).
func ParseRow(line []byte) (ledger.Row, error) {
	var r ledger.Row
	if err := json.Unmarshal(line, &r); err != nil {
		return ledger.Row{}, fmt.Errorf("not a ledger row: %w", err)
	}
	return r, nil
}

// AppendRow appends the row's JSON line, newline included, to dst.
func AppendRow(dst []byte, r *ledger.Row) []byte {
	b, err := json.Marshal(r)
	if err != nil { // a Row has no field that can fail to encode
		return dst
	}
	dst = append(dst, b...)
	return append(dst, '\n')
}
