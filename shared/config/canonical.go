package config

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"unicode/utf8"
)

// CanonicalJSON encodes a decoded configuration value (a *Governance, a
// *File, or any part of the schema) into one canonical JSON text, the input
// of the plan hash. The same value always gives the same bytes, natively and
// in the filter's wasm build, and they are the bytes encoding/json's Marshal
// writes for the value (a native test holds the two together):
//
//   - a struct is an object of every exported field, named by its json tag
//     (or Go name), in declaration order; json:"-" fields are left out, and
//     a field tagged omitempty when it is empty as encoding/json says (a
//     false bool, a nil pointer, an empty string, list or map, a zero
//     number); the schema uses omitempty so that a new switch or block
//     leaves the hash of every plan that does not set it as it was;
//   - a nil pointer, slice or map is null; an empty slice is [];
//   - map keys are sorted bytewise;
//   - USD is its exact dollar literal (USD.String: 5000, 0.000001);
//   - integers are decimal; a float is written as encoding/json writes it
//     (shortest round-trip digits, exponent form below 1e-6 and from 1e21);
//     NaN and infinities are an error;
//   - strings are escaped as encoding/json escapes them: " and \, \b \f \n
//     \r \t, other control bytes and < > & as \u00XX, U+2028 and U+2029 as
//     \u2028 and \u2029, each byte of invalid UTF-8 as \ufffd.
//
// A type outside what the schema uses (arrays, channels, funcs, interfaces
// holding such) is an error, never a panic.
func CanonicalJSON(v any) ([]byte, error) {
	e := canonical{}
	e.value(reflect.ValueOf(v))
	if e.err != nil {
		return nil, e.err
	}
	return e.buf, nil
}

type canonical struct {
	buf []byte
	err error
}

func (e *canonical) fail(format string, args ...any) {
	if e.err == nil {
		e.err = fmt.Errorf("config: canonical encoding: "+format, args...)
	}
}

func (e *canonical) value(v reflect.Value) {
	if e.err != nil {
		return
	}
	if !v.IsValid() {
		e.buf = append(e.buf, "null"...)
		return
	}
	if v.Type() == usdType {
		e.buf = append(e.buf, USD{Nanos: v.Field(0).Int()}.String()...)
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return
		}
		e.value(v.Elem())
	case reflect.Struct:
		e.buf = append(e.buf, '{')
		first := true
		for _, f := range structFields(v.Type()) {
			if f.omitEmpty && emptyField(v.Field(f.index)) {
				continue // omitempty, as encoding/json
			}
			if !first {
				e.buf = append(e.buf, ',')
			}
			first = false
			e.buf = appendJSONString(e.buf, f.name)
			e.buf = append(e.buf, ':')
			e.value(v.Field(f.index))
		}
		e.buf = append(e.buf, '}')
	case reflect.Slice:
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return
		}
		e.buf = append(e.buf, '[')
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.value(v.Index(i))
		}
		e.buf = append(e.buf, ']')
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			e.fail("unsupported map key type %s", v.Type().Key())
			return
		}
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return
		}
		type entry struct {
			key   string
			value reflect.Value
		}
		entries := make([]entry, 0, v.Len())
		for it := v.MapRange(); it.Next(); {
			entries = append(entries, entry{it.Key().String(), it.Value()})
		}
		sort.Slice(entries, func(a, b int) bool { return entries[a].key < entries[b].key })
		e.buf = append(e.buf, '{')
		for i, en := range entries {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = appendJSONString(e.buf, en.key)
			e.buf = append(e.buf, ':')
			e.value(en.value)
		}
		e.buf = append(e.buf, '}')
	case reflect.String:
		e.buf = appendJSONString(e.buf, v.String())
	case reflect.Bool:
		e.buf = strconv.AppendBool(e.buf, v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.buf = strconv.AppendUint(e.buf, v.Uint(), 10)
	case reflect.Float32:
		e.float(v.Float(), 32)
	case reflect.Float64:
		e.float(v.Float(), 64)
	default:
		e.fail("unsupported type %s", v.Type())
	}
}

// float writes f as encoding/json does: like strconv's shortest 'f', but
// 'e' below 1e-6 and from 1e21, with the exponent's leading zero dropped
// (1e-07 becomes 1e-7).
func (e *canonical) float(f float64, bits int) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		e.fail("unsupported value %s", strconv.FormatFloat(f, 'g', -1, bits))
		return
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b := strconv.AppendFloat(e.buf, f, format, -1, bits)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	e.buf = b
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaped as CanonicalJSON
// documents.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
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
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// emptyField reports what omitempty leaves out of the schema's fields: a
// false bool, a nil pointer, an empty string, slice or map, a zero number
// (encoding/json leaves out the same).
func emptyField(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Bool:
		return !v.Bool()
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	case reflect.String, reflect.Slice, reflect.Map:
		return v.Len() == 0
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	}
	return false
}
