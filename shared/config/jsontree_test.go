package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestParseJSONErrors(t *testing.T) {
	deep := strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1)
	tests := []struct{ in, err string }{
		{in: " \n\t", err: "json: empty document"},
		{in: "{\"a\":1,\n \"a\":2}", err: `json: line 2, column 2: duplicate field "a" in the top-level object`},
		{in: `{"a\u0062":1,"ab":2}`, err: `json: line 1, column 14: duplicate field "ab" in the top-level object`},
		{in: `{"a":1,"a"`, err: `json: line 1, column 8: duplicate field "a" in the top-level object`},
		{in: `{"a":{"b":[1,{"c":1,"c":2}]}}`, err: `json: line 1, column 21: duplicate field "c" in a.b[1]`},
		{in: "{\n\"a\" 1}", err: "json: line 2, column 5: invalid character '1' after object key"},
		{in: `{"a":1 "b":2}`, err: `json: line 1, column 8: invalid character '"' after object key:value pair`},
		{in: `[1 2]`, err: "json: line 1, column 4: invalid character '2' after array element"},
		{in: `[1x]`, err: "json: line 1, column 3: invalid character 'x' after array element"},
		{in: `{"a":1,}`, err: "json: line 1, column 8: invalid character '}' looking for beginning of object key string"},
		{in: `[1,]`, err: "json: line 1, column 4: invalid character ']' looking for beginning of value"},
		{in: `{'a':1}`, err: `json: line 1, column 2: invalid character '\'' looking for beginning of object key string`},
		{in: `{"a":-}`, err: "json: line 1, column 7: invalid character '}' in numeric literal"},
		{in: `{"a":01}`, err: "json: line 1, column 7: invalid character '1' after object key:value pair"},
		{in: `{"a":1.}`, err: "json: line 1, column 8: invalid character '}' after decimal point in numeric literal"},
		{in: `{"a":1e+}`, err: "json: line 1, column 9: invalid character '}' in exponent of numeric literal"},
		{in: `{"a":.5}`, err: "json: line 1, column 6: invalid character '.' looking for beginning of value"},
		{in: `{"a":+5}`, err: "json: line 1, column 6: invalid character '+' looking for beginning of value"},
		{in: `{"a":tru}`, err: "json: line 1, column 9: invalid character '}' in literal true (expecting 'e')"},
		{in: `{"a":nul`, err: "json: line 1, column 9: unexpected end of document"},
		{in: `{"a":"x` + "\n" + `"}`, err: `json: line 1, column 8: invalid character '\n' in string literal`},
		{in: `{"a":"\x"}`, err: "json: line 1, column 8: invalid character 'x' in string escape code"},
		{in: `{"a":"\u12g4"}`, err: `json: line 1, column 11: invalid character 'g' in \u hexadecimal character escape`},
		{in: `{"a":"\u12`, err: "json: line 1, column 11: unexpected end of document"},
		{in: "\xef\xbb\xbf{}", err: "json: line 1, column 1: invalid character 'ï' looking for beginning of value"},
		{in: `{"a":1}}`, err: "json: line 1, column 8: unexpected data after the top-level value"},
		{in: `12 x`, err: "json: line 1, column 4: unexpected data after the top-level value"},
		{in: deep, err: "json: line 1, column 10001: nested more than 10000 levels deep"},
	}
	for _, tc := range tests {
		_, err := ParseJSON([]byte(tc.in))
		if err == nil || err.Error() != tc.err {
			t.Errorf("ParseJSON(%.40q): %v, want %q", tc.in, err, tc.err)
		}
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("ParseJSON(%.40q): error %T, want *SyntaxError", tc.in, err)
		}
	}
}

func TestParseJSONTree(t *testing.T) {
	v, err := ParseJSON([]byte(` {"n":[0,-0.5,1e-7,1E+6,123456789012345678901234567890],
		"s":["", "a\"\\\/\b\f\n\r\t", "\u00e9\u20AC", "\ud83d\ude00", "\ud800x", "\udc00\ud800", "caf` + "\xc3\xa9 \xff" + `"],
		"l":[true,false,null,[],{}], "e":{}} `))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"n": []any{Number("0"), Number("-0.5"), Number("1e-7"), Number("1E+6"), Number("123456789012345678901234567890")},
		"s": []any{"", "a\"\\/\b\f\n\r\t", "é€", "😀", "\ufffdx", "\ufffd\ufffd", "café \ufffd"},
		"l": []any{true, false, nil, []any{}, map[string]any{}},
		"e": map[string]any{},
	}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("tree:\n%#v\nwant:\n%#v", v, want)
	}
	for _, in := range []string{`"top"`, `7`, `null`, `true`} {
		if _, err := ParseJSON([]byte(in)); err != nil {
			t.Errorf("ParseJSON(%s): %v", in, err)
		}
	}
}

// FuzzParseJSON checks the parser against encoding/json: a document
// encoding/json accepts parses to the same tree (numbers as their
// literals), unless it repeats a key in an object, which ParseJSON refuses;
// a document encoding/json refuses, ParseJSON refuses with a positioned
// *SyntaxError.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{
		`{"governance":{"enabled":true,"limits":[{"id":"a","amount_usd":0.000001,"thresholds":[0.5,1e-7]}]}}`,
		`{"a":[1,2,{"b":"c\u00e9\ud83d\ude00\ud800"}],"n":-0.5e+3,"t":[true,false,null]}`,
		`{"a":1,"a":2}`, `[1x]`, `{"a" 1}`, "{\"a\":\"\xff\"}", `tru`, `{"a":-}`, `[1.]`, `[1e]`, `{,}`, `{"a":1,}`, ` `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseJSON(b)
		if !json.Valid(b) {
			if err == nil {
				t.Fatalf("ParseJSON(%q) accepted what encoding/json refuses: %#v", b, got)
			}
			var se *SyntaxError
			if !errors.As(err, &se) || se.Format != "json" || (se.Line == 0) != (len(bytes.TrimLeft(b, " \t\r\n")) == 0) {
				t.Fatalf("ParseJSON(%q): error %#v", b, err)
			}
			return
		}
		if err != nil {
			if strings.Contains(err.Error(), "duplicate field") && hasDuplicateKey(t, b) {
				return
			}
			t.Fatalf("ParseJSON(%q) refused what encoding/json accepts: %v", b, err)
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var want any
		if err := d.Decode(&want); err != nil {
			t.Fatalf("encoding/json: %v", err)
		}
		if !reflect.DeepEqual(got, fromEncodingJSON(want)) {
			t.Fatalf("ParseJSON(%q):\n%#v\nencoding/json:\n%#v", b, got, want)
		}
	})
}

// fromEncodingJSON turns encoding/json's Numbers into Numbers.
func fromEncodingJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		return Number(x)
	case map[string]any:
		for k, e := range x {
			x[k] = fromEncodingJSON(e)
		}
	case []any:
		for i, e := range x {
			x[i] = fromEncodingJSON(e)
		}
	}
	return v
}

// hasDuplicateKey walks a valid document's tokens and reports whether some
// object repeats a key.
func hasDuplicateKey(t *testing.T, b []byte) bool {
	d := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		keys   map[string]bool
		object bool
		key    bool // the next string token is a key
	}
	var stack []frame
	dup := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return dup
		}
		if err != nil {
			t.Fatalf("encoding/json tokens: %v", err)
		}
		top := len(stack) - 1
		if top >= 0 && stack[top].object {
			if stack[top].key {
				if k, ok := tok.(string); ok {
					dup = dup || stack[top].keys[k]
					stack[top].keys[k] = true
					stack[top].key = false
					continue
				}
			} else {
				stack[top].key = true
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{keys: map[string]bool{}, object: true, key: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:top]
		}
	}
}
