package config

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"

	"github.com/tokentriage/tokentriage/shared/jsontok"
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
//   - strings are escaped as encoding/json escapes them
//     (jsontok.AppendStringHTML): " and \, \b \f \n \r \t, other control
//     bytes and < > & as \u00XX, U+2028 and U+2029 as \u2028 and \u2029,
//     each byte of invalid UTF-8 as \ufffd.
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
			e.buf = jsontok.AppendStringHTML(e.buf, f.name)
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
			e.buf = jsontok.AppendStringHTML(e.buf, en.key)
			e.buf = append(e.buf, ':')
			e.value(en.value)
		}
		e.buf = append(e.buf, '}')
	case reflect.String:
		e.buf = jsontok.AppendStringHTML(e.buf, v.String())
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

// float writes f as encoding/json does (jsontok.AppendFloat); NaN and the
// infinities are an error.
func (e *canonical) float(f float64, bits int) {
	b, ok := jsontok.AppendFloat(e.buf, f, bits)
	if !ok {
		e.fail("unsupported value %s", strconv.FormatFloat(f, 'g', -1, bits))
		return
	}
	e.buf = b
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
