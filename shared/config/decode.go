package config

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/tokentriage/tokentriage/shared/jsontok"
)

// DecodeStrict decodes a generic tree into out, a non-nil pointer, by
// reflection over the json tags of out's types, so that YAML and JSON share
// one set of field names. The tree is what both front ends produce:
// map[string]any, []any, string, Number, int, int64, float64, bool and
// nil (and, in native builds, encoding/json's Number, for trees built with
// its UseNumber).
//
// Decoding is strict: an unknown field is a problem naming the path and the
// known fields (governance.limits[0].attach: unknown field "nod" (known:
// node, level)); a value of the wrong kind is a problem naming the path and
// what was expected. Every problem is collected; the error, when not nil, is
// a Problems. path is the config path of tree ("governance", or "" for the
// top level of a file). A null value leaves the field at its zero value.
func DecodeStrict(tree any, out any, path string) error {
	rv := reflect.ValueOf(out)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return Problems{{Path: path, Message: fmt.Sprintf("config: decode target must be a non-nil pointer, got %T", out)}}
	}
	var d decoder
	d.value(tree, rv.Elem(), path)
	if len(d.problems) > 0 {
		return d.problems
	}
	return nil
}

type decoder struct {
	problems Problems
}

func (d *decoder) add(path, format string, args ...any) {
	d.problems = append(d.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

var usdType = reflect.TypeFor[USD]()

func (d *decoder) value(v any, rv reflect.Value, path string) {
	if n, ok := foreignNumber(v); ok {
		v = n
	}
	if v == nil {
		rv.SetZero()
		return
	}
	if rv.Type() == usdType {
		d.usd(v, rv, path)
		return
	}
	switch rv.Kind() {
	case reflect.Pointer:
		p := reflect.New(rv.Type().Elem())
		d.value(v, p.Elem(), path)
		rv.Set(p)
	case reflect.Struct:
		d.object(v, rv, path)
	case reflect.Slice:
		list, ok := v.([]any)
		if !ok {
			d.add(path, "expected a list, got %s", describe(v))
			return
		}
		s := reflect.MakeSlice(rv.Type(), len(list), len(list))
		for i, e := range list {
			d.value(e, s.Index(i), path+"["+strconv.Itoa(i)+"]")
		}
		rv.Set(s)
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			d.add(path, "expected an object, got %s", describe(v))
			return
		}
		if rv.Type().Key().Kind() != reflect.String {
			d.add(path, "config: unsupported map key type %s", rv.Type().Key())
			return
		}
		out := reflect.MakeMapWithSize(rv.Type(), len(m))
		for _, k := range sortedKeys(m) {
			e := reflect.New(rv.Type().Elem()).Elem()
			d.value(m[k], e, path+"["+strconv.Quote(k)+"]")
			out.SetMapIndex(reflect.ValueOf(k).Convert(rv.Type().Key()), e)
		}
		rv.Set(out)
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			hint := ""
			if _, isNum := v.(Number); isNum {
				hint = " (quote it to make it a string)"
			}
			d.add(path, "expected a string, got %s%s", describe(v), hint)
			return
		}
		rv.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			d.add(path, "expected true or false, got %s", describe(v))
			return
		}
		rv.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, msg := toInt(v)
		if msg == "" && rv.OverflowInt(n) {
			msg = fmt.Sprintf("%d is out of range", n)
		}
		if msg != "" {
			d.add(path, "%s", msg)
			return
		}
		rv.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, msg := toInt(v)
		if msg == "" && (n < 0 || rv.OverflowUint(uint64(n))) {
			msg = fmt.Sprintf("%d is out of range (expected a non-negative integer)", n)
		}
		if msg != "" {
			d.add(path, "%s", msg)
			return
		}
		rv.SetUint(uint64(n))
	case reflect.Float32, reflect.Float64:
		f, msg := toFloat(v)
		if msg != "" {
			d.add(path, "%s", msg)
			return
		}
		rv.SetFloat(f)
	case reflect.Interface:
		if rv.NumMethod() != 0 {
			d.add(path, "config: unsupported field type %s", rv.Type())
			return
		}
		rv.Set(reflect.ValueOf(v))
	default:
		d.add(path, "config: unsupported field type %s", rv.Type())
	}
}

// object decodes a JSON/YAML object into a struct by its json tags.
func (d *decoder) object(v any, rv reflect.Value, path string) {
	m, ok := v.(map[string]any)
	if !ok {
		d.add(path, "expected an object, got %s", describe(v))
		return
	}
	fields := structFields(rv.Type())
	known := make(map[string]int, len(fields))
	names := make([]string, len(fields))
	for i, f := range fields {
		known[f.name] = f.index
		names[i] = f.name
	}
	for _, k := range sortedKeys(m) {
		idx, ok := known[k]
		if !ok {
			d.add(path, "unknown field %q (known: %s)", k, strings.Join(names, ", "))
			continue
		}
		d.value(m[k], rv.Field(idx), JoinPath(path, k))
	}
}

type field struct {
	name      string
	index     int
	omitEmpty bool // json:",omitempty": left out of the canonical JSON when false or nil
}

// structFields lists the decodable fields of t in declaration order: the
// exported fields, named by their json tag (or their Go name when untagged),
// skipping json:"-".
func structFields(t reflect.Type) []field {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, omitEmpty := f.Name, false
		if tag, ok := f.Tag.Lookup("json"); ok {
			if tag == "-" {
				continue
			}
			n, opts, _ := strings.Cut(tag, ",")
			if n != "" {
				name = n
			}
			omitEmpty = opts == "omitempty"
		}
		out = append(out, field{name: name, index: i, omitEmpty: omitEmpty})
	}
	return out
}

// usdWanted is the problem for a value that is not a dollar amount.
const usdWanted = `expected a dollar amount (a number such as 1000 or 0.25, or a string such as "0.000001"), got %s`

// usd decodes a dollar amount exactly. The amount may be a number or a
// string holding one in JSON's number grammar ("0.000001", "1e-7"): hosts
// that carry the plugin configuration through a float64 (Istio's
// pluginConfig is a protobuf Struct) turn a tiny amount into exponent form,
// and quoting it keeps the decimal an operator wrote.
func (d *decoder) usd(v any, rv reflect.Value, path string) {
	var lit string
	switch n := v.(type) {
	case Number:
		lit = string(n)
	case string:
		if !jsontok.IsNumber(n) {
			d.add(path, usdWanted, describe(v))
			return
		}
		lit = n
	case int:
		lit = strconv.Itoa(n)
	case int64:
		lit = strconv.FormatInt(n, 10)
	case float64:
		if math.IsNaN(n) || math.IsInf(n, 0) {
			d.add(path, "expected a dollar amount, got %s", describe(v))
			return
		}
		lit = strconv.FormatFloat(n, 'g', -1, 64)
	default:
		d.add(path, usdWanted, describe(v))
		return
	}
	u, err := ParseUSD(lit)
	if err != nil {
		d.add(path, "%s", err)
		return
	}
	rv.Set(reflect.ValueOf(u))
}

func toInt(v any) (int64, string) {
	switch n := v.(type) {
	case Number:
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err == nil {
			return i, ""
		}
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, fmt.Sprintf("%s is out of range", n)
		}
		// An integral value written with a fraction or exponent (1e3,
		// 300.0) is still an integer.
		i, err = parseDecimal(string(n), 0)
		if err == nil {
			return i, ""
		}
		if strings.Contains(err.Error(), "out of range") {
			return 0, fmt.Sprintf("%s is out of range", n)
		}
		return 0, fmt.Sprintf("expected an integer, got %s", describe(v))
	case int:
		return int64(n), ""
	case int64:
		return n, ""
	case float64:
		if n != math.Trunc(n) || math.IsInf(n, 0) || math.IsNaN(n) {
			return 0, fmt.Sprintf("expected an integer, got %s", describe(v))
		}
		if n >= math.MaxInt64 || n < math.MinInt64 {
			return 0, fmt.Sprintf("%s is out of range", describe(v))
		}
		return int64(n), ""
	}
	return 0, fmt.Sprintf("expected an integer, got %s", describe(v))
}

func toFloat(v any) (float64, string) {
	var f float64
	switch n := v.(type) {
	case Number:
		var err error
		f, err = strconv.ParseFloat(string(n), 64)
		if err != nil {
			return 0, fmt.Sprintf("%s is out of range", n)
		}
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case float64:
		f = n
	default:
		return 0, fmt.Sprintf("expected a number, got %s", describe(v))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Sprintf("expected a finite number, got %s", describe(v))
	}
	return f, ""
}

// describe names a tree value in a problem message.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if len(x) > 40 {
			x = x[:37] + "..."
		}
		return "string " + strconv.Quote(x)
	case Number:
		return "number " + string(x)
	case int:
		return "number " + strconv.Itoa(x)
	case int64:
		return "number " + strconv.FormatInt(x, 10)
	case float64:
		return "number " + strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a value of type %T", v)
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
