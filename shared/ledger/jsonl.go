package ledger

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
)

// A batch of rows is JSON lines: each row's AppendJSON followed by "\n".
// This is the body of POST /tt/internal/v1/ingest and the format of
// decisions.jsonl.

// MaxLineBytes is the longest line a batch may hold. A row is a few hundred
// bytes; the cap only keeps a corrupt file from exhausting memory.
const MaxLineBytes = 1 << 20

// AppendJSONL appends rows as JSON lines.
func AppendJSONL(dst []byte, rows []Row) []byte {
	for i := range rows {
		dst = rows[i].AppendJSON(dst)
		dst = append(dst, '\n')
	}
	return dst
}

// LineError is a batch line that did not parse.
type LineError struct {
	Line int // 1-based
	Err  error
}

func (e *LineError) Error() string {
	var fe *FieldError
	if errors.As(e.Err, &fe) {
		if fe.Field == "" {
			return "ledger: line " + strconv.Itoa(e.Line) + ": " + fe.Reason
		}
		return "ledger: line " + strconv.Itoa(e.Line) + ": field " + strconv.Quote(fe.Field) + ": " + fe.Reason
	}
	return "ledger: line " + strconv.Itoa(e.Line) + ": " + e.Err.Error()
}

func (e *LineError) Unwrap() error { return e.Err }

// ParseJSONL parses a whole batch, appending its rows to dst. Blank lines
// (and a missing final newline) are fine. At the first line that does not
// parse it stops and returns the rows before it with a *LineError.
func ParseJSONL(data []byte, dst []Row) ([]Row, error) {
	line := 0
	for len(data) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i], data[i+1:]
		} else {
			l, data = data, nil
		}
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		r, err := ParseRow(l)
		if err != nil {
			return dst, &LineError{Line: line, Err: err}
		}
		dst = append(dst, r)
	}
	return dst, nil
}

// Decoder reads rows from a stream of JSON lines, such as decisions.jsonl
// on replay.
type Decoder struct {
	sc   *bufio.Scanner
	line int
}

// NewDecoder returns a Decoder reading from r.
func NewDecoder(r io.Reader) *Decoder {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	return &Decoder{sc: sc}
}

// Next returns the next row, skipping blank lines; io.EOF at the end. A line
// that does not parse is a *LineError, and Next can be called again to go on
// with the line after it. A final line without its newline (a write cut
// short by a crash) parses if it is complete and is a *LineError if not. A
// line longer than MaxLineBytes, or a read error, is a *LineError that ends
// the stream: every later call returns io.EOF.
func (d *Decoder) Next() (Row, error) {
	for d.sc.Scan() {
		d.line++
		l := d.sc.Bytes()
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		r, err := ParseRow(l)
		if err != nil {
			return Row{}, &LineError{Line: d.line, Err: err}
		}
		return r, nil
	}
	if err := d.sc.Err(); err != nil {
		return Row{}, &LineError{Line: d.line + 1, Err: err}
	}
	return Row{}, io.EOF
}

// Line returns the number of the line Next read last.
func (d *Decoder) Line() int { return d.line }
