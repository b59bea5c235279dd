package stub

import (
	"math"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Example is a JSON value that conforms to the JSON Schema schema (the
// subset tool parameters and structured outputs use: type, properties,
// required, items, prefixItems, enum, const, anyOf, oneOf, allOf, $ref
// into $defs or definitions, nullable types, string formats, minimum and
// maximum, minLength and maxLength, minItems and maxItems, default), the
// same for the same schema: what the stub answers a tool call's arguments
// or a structured output with. Every property of an object is given, so a
// strict schema (all required, no others) is met too.
func Example(schema []byte) []byte {
	root := gjson.ParseBytes(schema)
	g := &schemaGen{root: root}
	return g.value(nil, root, "", 0)
}

type schemaGen struct {
	root gjson.Result
}

// maxSchemaDepth bounds nesting and $ref chains: past it a value is the
// smallest the schema takes (null when it allows it, an empty object or
// array otherwise).
const maxSchemaDepth = 12

// member is r's member named key, matched exactly (gjson's path syntax
// would read a dot or a star in a property name).
func member(r gjson.Result, key string) gjson.Result {
	var out gjson.Result
	r.ForEach(func(k, v gjson.Result) bool {
		if k.Str == key {
			out = v
			return false
		}
		return true
	})
	return out
}

// resolve follows a local $ref ("#/$defs/Name", "#/definitions/Name", or
// any JSON pointer into the schema); an unresolvable one is {}.
func (g *schemaGen) resolve(ref string) gjson.Result {
	if !strings.HasPrefix(ref, "#") {
		return gjson.Parse(`{}`)
	}
	r := g.root
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#"), "/") {
		if part == "" {
			continue
		}
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		if r.IsArray() {
			i, err := strconv.Atoi(part)
			arr := r.Array()
			if err != nil || i < 0 || i >= len(arr) {
				return gjson.Parse(`{}`)
			}
			r = arr[i]
			continue
		}
		r = member(r, part)
		if !r.Exists() {
			return gjson.Parse(`{}`)
		}
	}
	return r
}

// types are the JSON types a schema allows, in its order; none when it
// does not say.
func types(s gjson.Result) []string {
	t := member(s, "type")
	if t.IsArray() {
		var out []string
		for _, x := range t.Array() {
			out = append(out, x.Str)
		}
		return out
	}
	if t.Type == gjson.String {
		return []string{t.Str}
	}
	return nil
}

// value appends an example of schema s to b; name is the property it is
// for ("" at the top), depth how deep it lies.
func (g *schemaGen) value(b []byte, s gjson.Result, name string, depth int) []byte {
	if depth > maxSchemaDepth {
		return g.smallest(b, s)
	}
	if !s.IsObject() {
		// true, or a schema that is not an object: anything goes.
		return append(b, `"stub"`...)
	}
	if ref := member(s, "$ref"); ref.Type == gjson.String {
		return g.value(b, g.resolve(ref.Str), name, depth+1)
	}
	if c := member(s, "const"); c.Exists() {
		return append(b, c.Raw...)
	}
	if e := member(s, "enum"); e.IsArray() && len(e.Array()) > 0 {
		return append(b, e.Array()[0].Raw...)
	}
	if d := member(s, "default"); d.Exists() {
		return append(b, d.Raw...)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts := member(s, k); alts.IsArray() && len(alts.Array()) > 0 {
			// The first alternative that is not only null.
			arr := alts.Array()
			pick := arr[0]
			for _, a := range arr {
				if t := types(a); !(len(t) == 1 && t[0] == "null") {
					pick = a
					break
				}
			}
			return g.value(b, pick, name, depth+1)
		}
	}
	if all := member(s, "allOf"); all.IsArray() && len(all.Array()) > 0 {
		return g.allOf(b, s, all.Array(), name, depth)
	}
	t := ""
	for _, x := range types(s) {
		if x != "null" {
			t = x
			break
		}
	}
	if t == "" && len(types(s)) > 0 {
		return append(b, "null"...)
	}
	if t == "" {
		switch {
		case member(s, "properties").Exists():
			t = "object"
		case member(s, "items").Exists() || member(s, "prefixItems").Exists():
			t = "array"
		default:
			t = "string"
		}
	}
	switch t {
	case "object":
		return g.object(b, []gjson.Result{s}, depth)
	case "array":
		return g.array(b, s, name, depth)
	case "integer":
		return strconv.AppendInt(b, int64(number(s, true)), 10)
	case "number":
		return strconv.AppendFloat(b, number(s, false), 'f', -1, 64)
	case "boolean":
		return append(b, "true"...)
	case "null":
		return append(b, "null"...)
	}
	return appendString(b, text(s, name))
}

// smallest is the least value s takes, where nesting has gone too deep.
func (g *schemaGen) smallest(b []byte, s gjson.Result) []byte {
	for _, t := range types(s) {
		switch t {
		case "null":
			return append(b, "null"...)
		case "array":
			return append(b, "[]"...)
		case "string":
			return append(b, `""`...)
		}
	}
	return append(b, "{}"...)
}

// object appends an object with every property of the schemas (the
// members of an allOf), each an example of its schema.
func (g *schemaGen) object(b []byte, schemas []gjson.Result, depth int) []byte {
	b = append(b, '{')
	seen := map[string]bool{}
	first := true
	for _, s := range schemas {
		member(s, "properties").ForEach(func(k, v gjson.Result) bool {
			if seen[k.Str] {
				return true
			}
			seen[k.Str] = true
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendString(b, k.Str)
			b = append(b, ':')
			b = g.value(b, v, k.Str, depth+1)
			return true
		})
	}
	return append(b, '}')
}

// allOf appends a value meeting every schema of all: the properties of
// all of them when they describe an object, the first one's otherwise.
func (g *schemaGen) allOf(b []byte, s gjson.Result, all []gjson.Result, name string, depth int) []byte {
	parts := []gjson.Result{s}
	object := member(s, "properties").Exists()
	for _, a := range all {
		if ref := member(a, "$ref"); ref.Type == gjson.String {
			a = g.resolve(ref.Str)
		}
		parts = append(parts, a)
		if member(a, "properties").Exists() {
			object = true
		}
	}
	if object {
		return g.object(b, parts, depth)
	}
	return g.value(b, all[0], name, depth+1)
}

// array appends an array of minItems examples (at least one, at most
// maxItems) of its items schema, after its prefixItems.
func (g *schemaGen) array(b []byte, s gjson.Result, name string, depth int) []byte {
	b = append(b, '[')
	n := 0
	if pre := member(s, "prefixItems"); pre.IsArray() {
		for _, p := range pre.Array() {
			if n > 0 {
				b = append(b, ',')
			}
			b = g.value(b, p, name, depth+1)
			n++
		}
	}
	// One item shows the shape; deep down (a recursive schema) none, when
	// the schema allows an empty array.
	want := 1
	if depth > maxSchemaDepth/3 {
		want = 0
	}
	if m := member(s, "minItems"); m.Type == gjson.Number {
		want = max(want, int(m.Int()))
	}
	if m := member(s, "maxItems"); m.Type == gjson.Number && int(m.Int()) < want {
		want = int(m.Int())
	}
	items := member(s, "items")
	if items.Type == gjson.False {
		return append(b, ']')
	}
	for ; n < want && n < 64; n++ {
		if n > 0 {
			b = append(b, ',')
		}
		b = g.value(b, items, name, depth+1)
	}
	return append(b, ']')
}

// number is a number within the schema's bounds: 1 when they allow it,
// the bound nearest otherwise, a multiple of multipleOf when one is set.
func number(s gjson.Result, integer bool) float64 {
	lo, hi := math.Inf(-1), math.Inf(1)
	if m := member(s, "minimum"); m.Type == gjson.Number {
		lo = m.Num
	}
	if m := member(s, "exclusiveMinimum"); m.Type == gjson.Number {
		lo = m.Num + 1
		if !integer {
			lo = m.Num + 0.5
		}
	}
	if m := member(s, "maximum"); m.Type == gjson.Number {
		hi = m.Num
	}
	if m := member(s, "exclusiveMaximum"); m.Type == gjson.Number {
		hi = m.Num - 1
		if !integer {
			hi = m.Num - 0.5
		}
	}
	v := 1.0
	switch {
	case v < lo:
		v = lo
	case v > hi:
		v = hi
	}
	if integer {
		v = math.Ceil(v)
		if v > hi {
			v = math.Floor(hi)
		}
	}
	if m := member(s, "multipleOf"); m.Type == gjson.Number && m.Num > 0 {
		v = math.Ceil(v/m.Num) * m.Num
	}
	return v
}

// text is a string for a property named name: a value of its format when
// it has one, else words naming the property, padded or cut to the
// schema's lengths.
func text(s gjson.Result, name string) string {
	v := "stub"
	if name != "" {
		v = "stub " + name
	}
	switch member(s, "format").Str {
	case "date-time":
		v = "2026-01-01T00:00:00Z"
	case "date":
		v = "2026-01-01"
	case "time":
		v = "00:00:00Z"
	case "email":
		v = "stub@example.com"
	case "uri", "url":
		v = "https://example.com/stub"
	case "uuid":
		v = "00000000-0000-4000-8000-000000000000"
	case "ipv4":
		v = "192.0.2.1"
	case "ipv6":
		v = "2001:db8::1"
	case "hostname":
		v = "example.com"
	}
	if m := member(s, "minLength"); m.Type == gjson.Number {
		for int64(len(v)) < m.Int() {
			v += "x"
		}
	}
	if m := member(s, "maxLength"); m.Type == gjson.Number && int64(len(v)) > m.Int() && m.Int() >= 0 {
		v = v[:m.Int()]
	}
	return v
}
