package ledgerlog

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// The ledger row's JSON form is the wire contract of shared/ledger (its
// struct tags). Ingest parses and the ledger encodes every row, so both are
// hand-written here for speed: AppendRow writes exactly the bytes
// encoding/json.Marshal writes for a ledger.Row (checked by a property
// test), and ParseRow accepts what encoding/json.Unmarshal accepts for one,
// rejecting a value of the wrong JSON type the same way.

// ParseRow decodes one line of the ledger (or of an ingest batch). Unknown
// fields are ignored, as encoding/json does.
func ParseRow(line []byte) (ledger.Row, error) {
	return parseRow(string(line))
}

// ParseRowShared is ParseRow without copying: the row's strings share
// memory with line, so line must not change while the row is in use (an
// ingest body, read once and dropped after the batch). Whoever keeps one
// of the strings past that copies it.
func ParseRowShared(line []byte) (ledger.Row, error) {
	if len(line) == 0 {
		return parseRow("")
	}
	return parseRow(unsafe.String(&line[0], len(line)))
}

func parseRow(line string) (ledger.Row, error) {
	var r ledger.Row
	if !gjson.Valid(line) {
		return r, errors.New("not a ledger row: the line is not valid JSON")
	}
	top := gjson.Parse(line)
	if !top.IsObject() {
		return r, errors.New("not a ledger row: the line is not a JSON object")
	}
	var err error
	top.ForEach(func(k, v gjson.Result) bool {
		err = parseField(&r, k.Str, v)
		return err == nil
	})
	if err != nil {
		return ledger.Row{}, fmt.Errorf("not a ledger row: %w", err)
	}
	return r, nil
}

func parseField(r *ledger.Row, key string, v gjson.Result) error {
	var err error
	switch key {
	case "request_id":
		r.RequestID, err = str(key, v)
	case "start":
		r.Start, err = timestamp(key, v)
	case "end":
		r.End, err = timestamp(key, v)
	case "kid":
		r.KID, err = str(key, v)
	case "node":
		r.Node, err = str(key, v)
	case "endpoint":
		r.Endpoint, err = str(key, v)
	case "provider":
		r.Provider, err = str(key, v)
	case "model":
		r.Model, err = str(key, v)
	case "model_served":
		r.Served, err = str(key, v)
	case "stream":
		r.Stream, err = boolean(key, v)
	case "usage":
		err = object(key, v, func(k string, v gjson.Result) error {
			var p *int64
			switch k {
			case "input":
				p = &r.Usage.Input
			case "output":
				p = &r.Usage.Output
			case "cached_input":
				p = &r.Usage.CachedInput
			case "reasoning":
				p = &r.Usage.Reasoning
			case "total":
				p = &r.Usage.Total
			default:
				return nil
			}
			var e error
			*p, e = integer("usage."+k, v)
			return e
		})
	case "status":
		var n int64
		n, err = integer(key, v)
		r.Status = int(n)
	case "decision":
		var s string
		s, err = str(key, v)
		r.Decision = ledger.Decision(s)
	case "error_type":
		r.ErrorType, err = str(key, v)
	case "refused_by":
		if v.Type == gjson.Null {
			r.RefusedBy = nil
			return nil
		}
		var ref ledger.Ref
		ref, err = parseRef(key, v)
		r.RefusedBy = &ref
	case "shadow":
		r.Shadow, err = refs(key, v)
	case "breached":
		r.Breached, err = refs(key, v)
	case "suspended":
		if v.Type == gjson.Null {
			r.Suspended = nil
			return nil
		}
		if !v.IsArray() {
			return fmt.Errorf("suspended: want an array of limit ids")
		}
		r.Suspended = []string{}
		for _, e := range v.Array() {
			s, err := str("suspended[]", e)
			if err != nil {
				return err
			}
			r.Suspended = append(r.Suspended, s)
		}
	case "estimated":
		err = object(key, v, func(k string, v gjson.Result) error {
			var e error
			switch k {
			case "input":
				r.Estimated.Input, e = boolean("estimated.input", v)
			case "output":
				r.Estimated.Output, e = boolean("estimated.output", v)
			}
			return e
		})
	case "replica":
		r.Replica, err = str(key, v)
	case "cost":
		if v.Type == gjson.Null {
			r.Cost = nil
			return nil
		}
		c := &ledger.Cost{}
		err = object(key, v, func(k string, v gjson.Result) error {
			var e error
			switch k {
			case "nanos":
				c.Nanos, e = integer("cost.nanos", v)
			case "unpriced":
				c.Unpriced, e = boolean("cost.unpriced", v)
			case "estimated":
				c.Estimated, e = boolean("cost.estimated", v)
			}
			return e
		})
		r.Cost = c
	}
	return err
}

func str(key string, v gjson.Result) (string, error) {
	switch v.Type {
	case gjson.String:
		return v.Str, nil
	case gjson.Null:
		return "", nil
	}
	return "", fmt.Errorf("%s: want a string, got %s", key, kind(v))
}

func boolean(key string, v gjson.Result) (bool, error) {
	switch v.Type {
	case gjson.True:
		return true, nil
	case gjson.False, gjson.Null:
		return false, nil
	}
	return false, fmt.Errorf("%s: want true or false, got %s", key, kind(v))
}

func integer(key string, v gjson.Result) (int64, error) {
	switch v.Type {
	case gjson.Null:
		return 0, nil
	case gjson.Number:
		n, err := strconv.ParseInt(v.Raw, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: want an integer, got %s", key, v.Raw)
		}
		return n, nil
	}
	return 0, fmt.Errorf("%s: want an integer, got %s", key, kind(v))
}

func timestamp(key string, v gjson.Result) (time.Time, error) {
	switch v.Type {
	case gjson.Null:
		return time.Time{}, nil
	case gjson.String:
		t, err := time.Parse(time.RFC3339Nano, v.Str)
		if err != nil {
			return time.Time{}, fmt.Errorf("%s: want an RFC 3339 time, got %q", key, v.Str)
		}
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%s: want an RFC 3339 time string, got %s", key, kind(v))
}

func object(key string, v gjson.Result, field func(k string, v gjson.Result) error) error {
	if v.Type == gjson.Null {
		return nil
	}
	if !v.IsObject() {
		return fmt.Errorf("%s: want an object, got %s", key, kind(v))
	}
	var err error
	v.ForEach(func(k, v gjson.Result) bool {
		err = field(k.Str, v)
		return err == nil
	})
	return err
}

func parseRef(key string, v gjson.Result) (ledger.Ref, error) {
	var ref ledger.Ref
	err := object(key, v, func(k string, v gjson.Result) error {
		var e error
		switch k {
		case "limit_id":
			ref.LimitID, e = str(key+".limit_id", v)
		case "limit_type":
			ref.LimitType, e = str(key+".limit_type", v)
		case "node":
			ref.Node, e = str(key+".node", v)
		}
		return e
	})
	return ref, err
}

func refs(key string, v gjson.Result) ([]ledger.Ref, error) {
	if v.Type == gjson.Null {
		return nil, nil
	}
	if !v.IsArray() {
		return nil, fmt.Errorf("%s: want an array of limit refs, got %s", key, kind(v))
	}
	out := []ledger.Ref{}
	for _, e := range v.Array() {
		ref, err := parseRef(key+"[]", e)
		if err != nil {
			return nil, err
		}
		out = append(out, ref)
	}
	return out, nil
}

func kind(v gjson.Result) string {
	switch {
	case v.IsObject():
		return "an object"
	case v.IsArray():
		return "an array"
	}
	switch v.Type {
	case gjson.Number:
		return "a number"
	case gjson.String:
		return "a string"
	case gjson.True, gjson.False:
		return "a boolean"
	}
	return "null"
}

// AppendRow appends the row's JSON line, newline included, to dst: the
// bytes encoding/json.Marshal writes, then '\n'.
func AppendRow(dst []byte, r *ledger.Row) []byte {
	dst = append(dst, `{"request_id":`...)
	dst = appendString(dst, r.RequestID)
	dst = append(dst, `,"start":`...)
	dst = appendTime(dst, r.Start)
	dst = append(dst, `,"end":`...)
	dst = appendTime(dst, r.End)
	dst = append(dst, `,"kid":`...)
	dst = appendString(dst, r.KID)
	dst = append(dst, `,"node":`...)
	dst = appendString(dst, r.Node)
	dst = append(dst, `,"endpoint":`...)
	dst = appendString(dst, r.Endpoint)
	dst = append(dst, `,"provider":`...)
	dst = appendString(dst, r.Provider)
	dst = append(dst, `,"model":`...)
	dst = appendString(dst, r.Model)
	dst = append(dst, `,"model_served":`...)
	dst = appendString(dst, r.Served)
	dst = append(dst, `,"stream":`...)
	dst = strconv.AppendBool(dst, r.Stream)
	dst = append(dst, `,"usage":{"input":`...)
	dst = strconv.AppendInt(dst, r.Usage.Input, 10)
	dst = append(dst, `,"output":`...)
	dst = strconv.AppendInt(dst, r.Usage.Output, 10)
	dst = append(dst, `,"cached_input":`...)
	dst = strconv.AppendInt(dst, r.Usage.CachedInput, 10)
	dst = append(dst, `,"reasoning":`...)
	dst = strconv.AppendInt(dst, r.Usage.Reasoning, 10)
	dst = append(dst, `,"total":`...)
	dst = strconv.AppendInt(dst, r.Usage.Total, 10)
	dst = append(dst, `},"status":`...)
	dst = strconv.AppendInt(dst, int64(r.Status), 10)
	dst = append(dst, `,"decision":`...)
	dst = appendString(dst, string(r.Decision))
	dst = append(dst, `,"error_type":`...)
	dst = appendString(dst, r.ErrorType)
	dst = append(dst, `,"refused_by":`...)
	if r.RefusedBy == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendRef(dst, r.RefusedBy)
	}
	dst = append(dst, `,"shadow":`...)
	dst = appendRefs(dst, r.Shadow)
	dst = append(dst, `,"breached":`...)
	dst = appendRefs(dst, r.Breached)
	dst = append(dst, `,"suspended":`...)
	if r.Suspended == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, s := range r.Suspended {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, s)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"estimated":{"input":`...)
	dst = strconv.AppendBool(dst, r.Estimated.Input)
	dst = append(dst, `,"output":`...)
	dst = strconv.AppendBool(dst, r.Estimated.Output)
	dst = append(dst, `},"replica":`...)
	dst = appendString(dst, r.Replica)
	dst = append(dst, `,"cost":`...)
	if r.Cost == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, `{"nanos":`...)
		dst = strconv.AppendInt(dst, r.Cost.Nanos, 10)
		dst = append(dst, `,"unpriced":`...)
		dst = strconv.AppendBool(dst, r.Cost.Unpriced)
		dst = append(dst, `,"estimated":`...)
		dst = strconv.AppendBool(dst, r.Cost.Estimated)
		dst = append(dst, '}')
	}
	return append(dst, "}\n"...)
}

func appendRef(dst []byte, r *ledger.Ref) []byte {
	dst = append(dst, `{"limit_id":`...)
	dst = appendString(dst, r.LimitID)
	dst = append(dst, `,"limit_type":`...)
	dst = appendString(dst, r.LimitType)
	dst = append(dst, `,"node":`...)
	dst = appendString(dst, r.Node)
	return append(dst, '}')
}

func appendRefs(dst []byte, rs []ledger.Ref) []byte {
	if rs == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i := range rs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendRef(dst, &rs[i])
	}
	return append(dst, ']')
}

// appendTime writes t as time.Time.MarshalJSON does. A year outside
// [0,9999] cannot be marshalled by encoding/json; it is written as the zero
// time instead of failing the whole batch (validation rejects such rows
// before they are written).
func appendTime(dst []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		t = time.Time{}
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

const hex = "0123456789abcdef"

// appendString writes s as encoding/json does with HTML escaping on:
// <, > and & as \u00XX, control characters escaped, invalid UTF-8 as
// \ufffd, and U+2028 and U+2029 escaped.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
