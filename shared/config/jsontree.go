package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
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

// ParseJSON parses a JSON document into the generic tree DecodeStrict reads:
// objects become map[string]any, arrays []any, numbers json.Number (the
// literal kept exact), and strings, booleans and null as themselves. A
// repeated object key is an error, as is anything after the first value.
func ParseJSON(b []byte) (any, error) {
	p := jsonParser{src: b, dec: json.NewDecoder(bytes.NewReader(b))}
	p.dec.UseNumber()
	v, err := p.value("")
	if err != nil {
		return nil, err
	}
	off := p.dec.InputOffset()
	if _, err := p.dec.Token(); err != io.EOF {
		return nil, p.errAt(p.skipSpace(off), "unexpected data after the top-level value")
	}
	return v, nil
}

type jsonParser struct {
	src []byte
	dec *json.Decoder
}

func (p *jsonParser) value(path string) (any, error) {
	tok, err := p.dec.Token()
	if err != nil {
		return nil, p.wrap(err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := map[string]any{}
			for p.dec.More() {
				off := p.dec.InputOffset()
				kt, err := p.dec.Token()
				if err != nil {
					return nil, p.wrap(err)
				}
				k, ok := kt.(string)
				if !ok {
					return nil, p.errAt(off, "expected an object key")
				}
				if _, dup := m[k]; dup {
					return nil, p.errAt(p.skipSpace(off), fmt.Sprintf("duplicate field %q in %s", k, pathOrTop(path)))
				}
				v, err := p.value(JoinPath(path, k))
				if err != nil {
					return nil, err
				}
				m[k] = v
			}
			if _, err := p.dec.Token(); err != nil {
				return nil, p.wrap(err)
			}
			return m, nil
		case '[':
			l := []any{}
			for p.dec.More() {
				v, err := p.value(path + "[" + strconv.Itoa(len(l)) + "]")
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			if _, err := p.dec.Token(); err != nil {
				return nil, p.wrap(err)
			}
			return l, nil
		}
		return nil, p.errAt(p.dec.InputOffset(), fmt.Sprintf("unexpected %q", rune(t)))
	default:
		return tok, nil // string, json.Number, bool or nil
	}
}

// skipSpace moves an offset past whitespace and separators to the start of
// the next token.
func (p *jsonParser) skipSpace(off int64) int64 {
	for off < int64(len(p.src)) {
		switch p.src[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

func pathOrTop(path string) string {
	if path == "" {
		return "the top-level object"
	}
	return path
}

func (p *jsonParser) wrap(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return p.errAt(se.Offset, se.Error())
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		if len(bytes.TrimSpace(p.src)) == 0 {
			return &SyntaxError{Format: "json", Msg: "empty document"}
		}
		return p.errAt(int64(len(p.src)), "unexpected end of document")
	}
	return &SyntaxError{Format: "json", Msg: err.Error()}
}

// errAt positions a message at a byte offset of the source.
func (p *jsonParser) errAt(off int64, msg string) error {
	if off > int64(len(p.src)) {
		off = int64(len(p.src))
	}
	line, col := 1, 1
	for _, c := range p.src[:off] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return &SyntaxError{Format: "json", Line: line, Column: col, Msg: msg}
}
