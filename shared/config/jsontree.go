package config

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/tokentriage/tokentriage/shared/jsontok"
)

// SyntaxError is a configuration document that could not be parsed, with
// the position of the fault (1-based; Column 0 when unknown).
type SyntaxError struct {
	Format string // "json" or "yaml"
	Line   int
	Column int
	Msg    string
}

func (e *SyntaxError) Error() string {
	switch {
	case e.Line == 0:
		return fmt.Sprintf("%s: %s", e.Format, e.Msg)
	case e.Column == 0:
		return fmt.Sprintf("%s: line %d: %s", e.Format, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: line %d, column %d: %s", e.Format, e.Line, e.Column, e.Msg)
}

// maxJSONDepth bounds how deeply arrays and objects nest, as encoding/json
// bounds it.
const maxJSONDepth = 10000

// ParseJSON parses a JSON document (RFC 8259) into the generic tree
// DecodeStrict reads: objects become map[string]any, arrays []any, numbers
// Number (the literal kept exact), and strings, booleans and null as
// themselves. A repeated object key is an error, as is anything after the
// first value. Strings decode as encoding/json decodes them: invalid UTF-8
// and unpaired surrogate escapes become U+FFFD. Syntax errors carry the line
// and column (in bytes) of the offending character and encoding/json's
// wording (invalid character '}' looking for beginning of value).
//
// It reads with the project's tokenizer under encoding/json's rules, so the
// filter's wasm build carries no encoding/json (see RATIONALE.md, "Why does
// shared/config parse JSON itself?" and "Why one JSON tokenizer?"), and
// builds the tree on a stack of its own: no input deepens the goroutine's.
func ParseJSON(b []byte) (any, error) {
	var t jsontok.Tokenizer
	t.Reset(b, jsontok.Rules{MaxDepth: maxJSONDepth})
	type frame struct {
		obj  map[string]any // an object, or
		list []any          // an array
		key  string         // in an object, the member being read
	}
	var stack []frame
	var top any
	for {
		tok := t.Next()
		k := tok.Kind
		var v any
		switch k {
		case jsontok.End:
			return top, nil
		case jsontok.Err:
			return nil, jsonError(b, t.Err())
		case jsontok.ObjectStart:
			stack = append(stack, frame{obj: map[string]any{}})
			continue
		case jsontok.ArrayStart:
			stack = append(stack, frame{list: []any{}})
			continue
		case jsontok.Key:
			f := &stack[len(stack)-1]
			key := jsontok.Text(b[tok.Start:tok.End], true)
			if _, dup := f.obj[key]; dup {
				path := ""
				for _, up := range stack[:len(stack)-1] {
					if up.obj != nil {
						path = JoinPath(path, up.key)
					} else {
						path += "[" + strconv.Itoa(len(up.list)) + "]"
					}
				}
				if path == "" {
					path = "the top-level object"
				}
				return nil, errAt(b, tok.Start, fmt.Sprintf("duplicate field %q in %s", key, path))
			}
			f.key = key
			continue
		case jsontok.ObjectEnd, jsontok.ArrayEnd:
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if f.obj != nil {
				v = f.obj
			} else {
				v = f.list
			}
		case jsontok.String:
			v = jsontok.Text(b[tok.Start:tok.End], true)
		case jsontok.Number:
			v = Number(b[tok.Start:tok.End])
		case jsontok.True, jsontok.False:
			v = k == jsontok.True
		case jsontok.Null:
			v = nil
		}
		if len(stack) == 0 {
			top = v
			continue
		}
		if f := &stack[len(stack)-1]; f.obj != nil {
			f.obj[f.key] = v
		} else {
			f.list = append(f.list, v)
		}
	}
}

// jsonError is the SyntaxError of a fault the tokenizer found, in
// encoding/json's words where it has them.
func jsonError(b []byte, e jsontok.Error) error {
	switch {
	case e.EOF && len(bytes.TrimLeft(b, " \t\r\n")) == 0:
		return &SyntaxError{Format: "json", Msg: "empty document"}
	case e.EOF:
		return errAt(b, e.Off, "unexpected end of document")
	case e.Code == jsontok.ErrTrailing:
		return errAt(b, e.Off, "unexpected data after the top-level value")
	case e.Code == jsontok.ErrDepth:
		return errAt(b, e.Off, fmt.Sprintf("nested more than %d levels deep", maxJSONDepth))
	}
	return errAt(b, e.Off, e.GoText())
}

// errAt positions a message at a byte offset of the source.
func errAt(src []byte, off int, msg string) error {
	off = min(off, len(src))
	line, col := 1, 1
	for _, c := range src[:off] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return &SyntaxError{Format: "json", Line: line, Column: col, Msg: msg}
}
