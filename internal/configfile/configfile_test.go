package configfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tokentriage/tokentriage/shared/config"
)

func TestParseYAMLTree(t *testing.T) {
	tree, err := ParseYAML([]byte(`
a: 0.000001      # kept exactly
b: 1000
c: 1_000
d: +1.5
e: .5
f: 1e3
g: "on"
h: on            # YAML 1.2: a string, as the posture modes need
i: true
j: ~
k: [x, 2]
l: 0x10
m: 2026-09-01
n: 99999999999999999999
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"a": config.Number("0.000001"), "b": config.Number("1000"), "c": config.Number("1000"),
		"d": config.Number("1.5"), "e": config.Number("0.5"), "f": config.Number("1e3"),
		"g": "on", "h": "on", "i": true, "j": nil, "k": []any{"x", config.Number("2")},
		"l": config.Number("16"), "m": "2026-09-01", "n": config.Number("99999999999999999999"),
	}
	if !reflect.DeepEqual(tree, want) {
		t.Errorf("tree:\n%#v\nwant:\n%#v", tree, want)
	}
}

func TestParseYAMLAliasesAndMerge(t *testing.T) {
	tree, err := ParseYAML([]byte(`
base: &base { type: rpm, amount: 10, period: 1m }
list:
  - <<: *base
    id: a
    amount: 20
  - *base
`))
	if err != nil {
		t.Fatal(err)
	}
	list := tree.(map[string]any)["list"].([]any)
	first := list[0].(map[string]any)
	if first["amount"] != config.Number("20") || first["type"] != "rpm" || first["id"] != "a" {
		t.Errorf("merge: %v", first)
	}
	if list[1].(map[string]any)["period"] != "1m" {
		t.Errorf("alias: %v", list[1])
	}
}

func TestParseYAMLErrors(t *testing.T) {
	tests := []struct{ in, err string }{
		{"a: 1\nb:\n  c: 2\n  c: 3\n", `yaml: line 4, column 3: duplicate field "c" in b`},
		{"a: 1\na: 2\n", `yaml: line 2, column 1: duplicate field "a" in the top-level mapping`},
		{"a: 1\n---\nb: 2\n", "yaml: line 2: a second document (---); a configuration file holds one"},
		{"a: !env HOME\n", `yaml: line 1, column 4: unsupported tag "!env"`},
		{"a: [1, 2\n", "yaml: line 1: did not find expected ',' or ']'"},
		{"? [a]\n: 1\n", "yaml: line 1, column 3: a mapping key must be a plain value, in the top-level mapping"},
		{"a: &x [1]\nb:\n  <<: *x\n", "yaml: line 3, column 7: a merge key (<<) must name a mapping, in b"},
	}
	for _, tc := range tests {
		_, err := ParseYAML([]byte(tc.in))
		var se *config.SyntaxError
		if !errors.As(err, &se) || err.Error() != tc.err {
			t.Errorf("ParseYAML(%q): %v, want %q", tc.in, err, tc.err)
		}
	}
}

func TestParseYAMLAliasBomb(t *testing.T) {
	doc := "a: &a [x,x,x,x,x,x,x,x,x,x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h"} {
		doc += n + ": &" + n + " [*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + "]\n"
		prev = n
	}
	_, err := ParseYAML([]byte(doc))
	var se *config.SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("an alias bomb parsed: %v", err)
	}
}

func TestParseFormats(t *testing.T) {
	yaml := "governance:\n  enabled: true\n  limits:\n    - { id: a, attach: { node: __global }, type: budget_usd, amount_usd: 0.000001, period: day }\n"
	js := `{"governance":{"enabled":true,"limits":[{"id":"a","attach":{"node":"__global"},"type":"budget_usd","amount_usd":0.000001,"period":"day"}]}}`
	for _, tc := range []struct{ name, body string }{
		{"c.yaml", yaml}, {"c.yml", yaml}, {"c.json", js}, {"c.conf", js}, {"c.conf", yaml},
	} {
		f, err := Parse(tc.name, []byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := f.Governance.Limits[0].AmountUSD.Nanos; got != 1000 {
			t.Errorf("%s: amount_usd %d nanodollars, want 1000", tc.name, got)
		}
	}
	// JSON spelt in a .json file goes through the JSON front end, which
	// names duplicate fields with their position.
	_, err := Parse("c.json", []byte(`{"governance":{},"governance":{}}`))
	if err == nil || err.Error() != `json: line 1, column 18: duplicate field "governance" in the top-level object` {
		t.Errorf("json duplicate: %v", err)
	}
	// Decode problems come back as config.Problems.
	_, err = Parse("c.yaml", []byte("governance:\n  limits:\n    - { attach: { nod: x } }\n"))
	var ps config.Problems
	if !errors.As(err, &ps) || ps.Error() != `governance.limits[0].attach: unknown field "nod" (known: node, level)` {
		t.Errorf("problems: %v", err)
	}
	f, err := Parse("empty.yaml", nil)
	if err != nil || f.Governance != nil {
		t.Errorf("empty file: %+v, %v", f, err)
	}
}

// TestParseAmountForms: a dollar amount in exponent form or quoted reads
// exactly in both spellings.
func TestParseAmountForms(t *testing.T) {
	yaml := "governance:\n  limits:\n" +
		"    - { amount_usd: 1e-7, override: { max_amount_usd: \"0.000001\" } }\n" +
		"    - { amount_usd: '2.5E-6', override: { max_amount_usd: 1E+3 } }\n"
	js := `{"governance":{"limits":[{"amount_usd":1e-7,"override":{"max_amount_usd":"0.000001"}},` +
		`{"amount_usd":"2.5E-6","override":{"max_amount_usd":1E+3}}]}}`
	for _, tc := range []struct{ name, body string }{{"c.yaml", yaml}, {"c.json", js}} {
		f, err := Parse(tc.name, []byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		l := f.Governance.Limits
		if l[0].AmountUSD.Nanos != 100 || l[0].Override.MaxAmountUSD.Nanos != 1000 ||
			l[1].AmountUSD.Nanos != 2500 || l[1].Override.MaxAmountUSD.Nanos != 1000*config.NanosPerUSD {
			t.Errorf("%s: %v %v %v %v", tc.name, l[0].AmountUSD, l[0].Override.MaxAmountUSD, l[1].AmountUSD, l[1].Override.MaxAmountUSD)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tt.yaml")
	if err := os.WriteFile(path, []byte("governance: { enabled: true }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil || f.Governance.Enabled == nil || !*f.Governance.Enabled {
		t.Fatalf("Load: %+v, %v", f, err)
	}
	_, err = Load(filepath.Join(dir, "missing.yaml"))
	var re *ReadError
	if !errors.As(err, &re) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v (%T)", err, err)
	}
	if want := "cannot read the config file " + filepath.Join(dir, "missing.yaml") + ": no such file or directory"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

// TestReadErrorWithoutCause: a ReadError around an error that wraps
// nothing still names the cause (it printed <nil>).
func TestReadErrorWithoutCause(t *testing.T) {
	err := &ReadError{Path: "tt.yaml", Err: errors.New("boom")}
	if got := err.Error(); got != "cannot read the config file tt.yaml: boom" {
		t.Errorf("%q", got)
	}
}

func FuzzParseYAML(f *testing.F) {
	f.Add([]byte("governance:\n  enabled: true\n  limits: [{ id: a, amount_usd: 0.5 }]\n"))
	f.Add([]byte("a: &a { b: *a }\n"))
	f.Add([]byte("<<: [{a: 1}, {b: 2}]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = Parse("f.yaml", b)
	})
}

// TestParseByteOrderMark: a file saved with a UTF-8 byte order mark (as
// some editors on Windows write it) reads the same in both spellings; the
// YAML front end always skipped it, the JSON one stopped at it.
func TestParseByteOrderMark(t *testing.T) {
	const bom = "\xef\xbb\xbf"
	for _, tc := range []struct{ name, body string }{
		{"c.json", bom + `{"governance":{"enabled":true}}`},
		{"c.conf", bom + `{"governance":{"enabled":true}}`},
		{"c.yaml", bom + "governance:\n  enabled: true\n"},
	} {
		f, err := Parse(tc.name, []byte(tc.body))
		if err != nil || f.Governance == nil || f.Governance.Enabled == nil || !*f.Governance.Enabled {
			t.Errorf("%s: %+v, %v", tc.name, f, err)
		}
	}
}

// TestParseYAMLTabIndent: YAML's own words for a tab in the indentation do
// not say what is wrong, so the error says it.
func TestParseYAMLTabIndent(t *testing.T) {
	_, err := Parse("c.yaml", []byte("governance:\n\tenabled: true\n"))
	want := "yaml: line 2: found character that cannot start any token (a tab: YAML indents with spaces only; replace the tabs at the start of the line with spaces)"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}
