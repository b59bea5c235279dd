// Package jv reads JSON values by member name over jsontok's grammar: a
// Value is one value of a document (its kind, its bytes, its decoded
// text or number, its offset), ForEach hands out an object's members or
// an array's elements in order, Get follows a dotted path of member names
// and array indexes. It is the reading the filter and shared/llm do where
// they want a few members of a document rather than its every token (the
// accountant's answers, a request body's governed members, an answer's or
// an event's usage), and it is what lets filter.wasm go without gjson and
// the encoding/json gjson links (RATIONALE.md, "Why does filter.wasm not
// link gjson or encoding/json?").
//
// On a valid document a Value reads as gjson's Result of the same name
// reads (the same kinds, bytes, text, numbers and offsets; the fuzz target
// holds the two together). A document that breaks the grammar is read up
// to its first fault and no further: every member or element complete
// before the fault is handed out as it is; one whose value holds the fault
// is handed out only when it is an object or array, cut at the fault (so
// what it holds before the fault is read in turn, and a reader that needs
// the whole value checks it: Complete), and nothing after it is. gjson
// read on past a fault by guesses of its own.
//
// Nothing recurses (a nested value is crossed by jsontok's iterative
// skip) and nothing allocates but a string's decoded text when it holds
// an escape, and the copies ParseBytes and GetBytes make.
package jv

import (
	"strconv"
	"strings"
	"unsafe"

	"github.com/tokentriage/tokentriage/shared/jsontok"
)

// Type is what a Value is; the zero Type is Null, and a Value that does
// not exist is a Null with no bytes.
type Type uint8

const (
	Null Type = iota
	False
	Number
	String
	True
	JSON // an object or an array
)

var typeNames = [...]string{"Null", "False", "Number", "String", "True", "JSON"}

// String names t as gjson's Type does: "Null", "False", "Number",
// "String", "True", "JSON".
func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return ""
}

// Value is one JSON value.
type Value struct {
	Type Type
	// Raw is the value's bytes as the document has them: a string with
	// its quotes; an object or array from its bracket to its close (to
	// the fault, when one breaks it off).
	Raw string
	// Str is a string's decoded text (escapes resolved, other bytes as
	// they are); for another kind, empty.
	Str string
	// Num is a number's value (for an array element's key, its index).
	Num float64
	// Index is the offset of Raw in the document parsed.
	Index int
	// cut: a fault inside the object or array broke it off.
	cut bool
}

var rules = jsontok.GJSON

func bytesOf(s string) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// Parse reads the value doc starts with (after space). An object or array
// is not crossed until it is read: its Raw is the rest of doc, as gjson's
// Parse has it. Values read from it alias doc.
func Parse(doc string) Value {
	b := bytesOf(doc)
	i := jsontok.SkipSpace(b, 0)
	if i >= len(b) {
		return Value{}
	}
	if b[i] == '{' || b[i] == '[' {
		return Value{Type: JSON, Raw: doc[i:], Index: i}
	}
	v, _, ok := scalarAt(doc, b, i)
	if !ok {
		return Value{}
	}
	v.Index = i
	return v
}

// ParseBytes is Parse of a copy of doc: what it hands out outlives doc.
func ParseBytes(doc []byte) Value { return Parse(string(doc)) }

// GetBytes is Parse(doc).Get(path), its text copied out of doc.
func GetBytes(doc []byte, path string) Value {
	v := Parse(unsafe.String(unsafe.SliceData(doc), len(doc))).Get(path)
	if v.Raw != "" {
		raw := string(bytesOf(v.Raw))
		if v.Type == String && len(v.Str) == len(v.Raw)-2 {
			v.Str = raw[1 : len(raw)-1]
		} else if v.Str != "" {
			v.Str = string(bytesOf(v.Str))
		}
		v.Raw = raw
	}
	return v
}

// scalarAt reads the string, number or literal at b[i] (doc and b are
// the same bytes); ok is false when it breaks the grammar.
func scalarAt(doc string, b []byte, i int) (v Value, end int, ok bool) {
	switch c := b[i]; {
	case c == '"':
		end, shrink, code := jsontok.ScanString(b, i, false)
		if code != jsontok.ErrNone {
			return Value{}, end, false
		}
		v = Value{Type: String, Raw: doc[i:end]}
		if shrink == 0 {
			v.Str = doc[i+1 : end-1]
		} else {
			v.Str = jsontok.Text(b[i:end], false)
		}
		return v, end, true
	case c == '-' || c >= '0' && c <= '9':
		end, code := jsontok.ScanNumber(b, i)
		if code != jsontok.ErrNone {
			return Value{}, end, false
		}
		v = Value{Type: Number, Raw: doc[i:end]}
		v.Num, _ = strconv.ParseFloat(v.Raw, 64) // the grammar's numbers all parse; a huge one is ±Inf, as gjson has it
		return v, end, true
	case c == 't' || c == 'f' || c == 'n':
		kind, end := jsontok.ScanLiteral(b, i)
		switch kind {
		case jsontok.True:
			return Value{Type: True, Raw: doc[i:end]}, end, true
		case jsontok.False:
			return Value{Type: False, Raw: doc[i:end]}, end, true
		case jsontok.Null:
			return Value{Type: Null, Raw: doc[i:end]}, end, true
		}
		return Value{}, end, false
	}
	return Value{}, i, false
}

// Exists reports whether v is a value (null included) rather than nothing.
func (v Value) Exists() bool { return v.Type != Null || len(v.Raw) != 0 }

// IsObject reports whether v is an object.
func (v Value) IsObject() bool { return v.Type == JSON && len(v.Raw) > 0 && v.Raw[0] == '{' }

// IsArray reports whether v is an array.
func (v Value) IsArray() bool { return v.Type == JSON && len(v.Raw) > 0 && v.Raw[0] == '[' }

// Complete reports whether v is whole: false for an object or array a
// fault broke off (see the package comment) and for one Parse has not
// crossed yet, true for anything else that exists.
func (v Value) Complete() bool {
	if v.Type != JSON {
		return v.Exists()
	}
	if v.cut {
		return false
	}
	b := bytesOf(v.Raw)
	end, err := jsontok.Skip(b, 0, rules)
	return err.Code == jsontok.ErrNone && jsontok.SkipSpace(b, end) == len(b)
}

// ForEach hands each member of an object (its name as a String key) or
// each element of an array (its index as a Number key) to fn, in order,
// until fn returns false. A value that is not an object or array is handed
// out once, itself, with a key that does not exist (as gjson does).
func (v Value) ForEach(fn func(key, value Value) bool) {
	if !v.Exists() {
		return
	}
	if v.Type != JSON {
		fn(Value{}, v)
		return
	}
	doc := v.Raw
	b := bytesOf(doc)
	obj := b[0] == '{'
	i := 1
	for n := 0; ; n++ {
		i = jsontok.SkipSpace(b, i)
		if i >= len(b) {
			return
		}
		if n == 0 && (obj && b[i] == '}' || !obj && b[i] == ']') {
			return
		}
		var key Value
		if obj {
			if b[i] != '"' {
				return
			}
			k, end, ok := scalarAt(doc, b, i)
			if !ok {
				return
			}
			key = k
			key.Index = v.Index + i
			i = jsontok.SkipSpace(b, end)
			if i >= len(b) || b[i] != ':' {
				return
			}
			i = jsontok.SkipSpace(b, i+1)
			if i >= len(b) {
				return
			}
		} else {
			key = Value{Type: Number, Num: float64(n)}
		}
		val, end, ok := valueAt(doc, b, i)
		if !ok {
			return
		}
		val.Index = v.Index + i
		if !fn(key, val) || val.cut {
			return
		}
		i = jsontok.SkipSpace(b, end)
		if i >= len(b) || b[i] != ',' {
			return // the close, or a fault: nothing more either way
		}
		i++
	}
}

// valueAt reads the value at b[i]: a scalar, or an object or array crossed
// to its close, or cut at the fault inside it.
func valueAt(doc string, b []byte, i int) (v Value, end int, ok bool) {
	if c := b[i]; c != '{' && c != '[' {
		return scalarAt(doc, b, i)
	}
	end, err := jsontok.Skip(b, i, rules)
	if err.Code != jsontok.ErrNone {
		return Value{Type: JSON, Raw: doc[i:max(err.Off, i+1)], cut: true}, err.Off, true
	}
	return Value{Type: JSON, Raw: doc[i:end]}, end, true
}

// Get follows path, member names and array indexes separated by dots
// ("scopes.models", "leases.0"), from v. As gjson does, the first member
// of a name that leads to the rest of the path is the one followed: in
// {"f":{"a":1},"f":{"b":2}}, "f.b" is 2. It is a Value that does not exist
// when the path leads nowhere. (gjson's wildcards, escapes and modifiers
// are not read.) It recurses once per dot of path, never per level of v.
func (v Value) Get(path string) Value {
	name, rest, more := path, "", false
	for j := 0; j < len(path); j++ {
		if path[j] == '.' {
			name, rest, more = path[:j], path[j+1:], true
			break
		}
	}
	var found Value
	switch {
	case v.IsObject():
		v.ForEach(func(k, val Value) bool {
			if k.Str != name {
				return true
			}
			if !more {
				found = val
				return false
			}
			if r := val.Get(rest); r.Exists() {
				found = r
				return false
			}
			return true
		})
	case v.IsArray():
		want, err := strconv.Atoi(name)
		if err != nil || want < 0 || name[0] == '+' {
			return Value{}
		}
		v.ForEach(func(k, val Value) bool {
			if int(k.Num) != want {
				return true
			}
			if found = val; more {
				found = val.Get(rest)
			}
			return false
		})
	}
	return found
}

// Array is v's elements: none for null or nothing, v itself when it is
// not an array (as gjson has it).
func (v Value) Array() []Value {
	if v.Type == Null {
		return nil
	}
	if !v.IsArray() {
		return []Value{v}
	}
	var out []Value
	v.ForEach(func(_, e Value) bool {
		out = append(out, e)
		return true
	})
	return out
}

// String is v as text: a string's text, a number's bytes (or its value
// written out, for one with a fraction or exponent), "true", "false", an
// object's or array's bytes, "" for null or nothing.
func (v Value) String() string {
	switch v.Type {
	case False:
		return "false"
	case True:
		return "true"
	case String:
		return v.Str
	case JSON:
		return v.Raw
	case Number:
		if len(v.Raw) == 0 { // an element's index
			return strconv.FormatFloat(v.Num, 'f', -1, 64)
		}
		i := 0
		if v.Raw[0] == '-' {
			i++
		}
		for ; i < len(v.Raw); i++ {
			if v.Raw[i] < '0' || v.Raw[i] > '9' {
				return strconv.FormatFloat(v.Num, 'f', -1, 64)
			}
		}
		return v.Raw
	}
	return ""
}

// Bool is true for true, a non-zero number and a string ParseBool reads
// as true; false otherwise.
func (v Value) Bool() bool {
	switch v.Type {
	case True:
		return true
	case Number:
		return v.Num != 0
	case String:
		b, _ := strconv.ParseBool(strings.ToLower(v.Str))
		return b
	}
	return false
}

// Int is v as an integer, as gjson reads it: a number inside float64's
// exact range cut toward zero, beyond it its bytes read as an integer, or
// its value, saturated at int64's bounds; a string holding a number read
// the same way; 1 for true; 0 for anything else.
func (v Value) Int() int64 {
	switch v.Type {
	case True:
		return 1
	case String:
		if n, ok := parseInt(v.Str); ok {
			return n
		}
		if f, err := strconv.ParseFloat(v.Str, 64); err == nil {
			return toInt(f)
		}
	case Number:
		if v.Num >= -maxExact && v.Num <= maxExact {
			return int64(v.Num)
		}
		if n, ok := parseInt(v.Raw); ok {
			return n
		}
		return toInt(v.Num)
	}
	return 0
}

const maxExact = 1<<53 - 1

// parseInt reads an optional '-' and decimal digits as gjson does: the
// digits read as a uint64 (given up past its range, as gjson's are), then
// saturated at int64's bounds.
func parseInt(s string) (int64, bool) {
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) == 0 {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		m := n*10 + uint64(s[i]-'0')
		if m < n {
			return 0, false
		}
		n = m
	}
	switch {
	case neg && n > 1<<63:
		return -1 << 63, true
	case neg:
		return -int64(n), true
	case n > 1<<63-1:
		return 1<<63 - 1, true
	}
	return int64(n), true
}

// toInt converts f saturated at int64's bounds.
func toInt(f float64) int64 {
	switch {
	case f >= 9.223372036854775807e18:
		return 1<<63 - 1
	case f < -9.223372036854775808e18:
		return -1 << 63
	}
	return int64(f)
}
