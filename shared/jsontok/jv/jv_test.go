package jv

import (
	"math"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tokentriage/tokentriage/shared/jsontok"
)

var seeds = []string{
	`{"a":1,"b":"x\u00e9\n","c":[true,false,null,{"d":-2.5e3}],"a":2}`,
	` [ 1 , "2" , [ ] , { } , 9007199254740993, 1e400, -0 ] `,
	`{"usage":{"prompt_tokens":5,"completion_tokens":7},"model":"m"}`,
	`"just a string"`, `12.5`, `true`, `null`, `{}`, `[]`,
	`{"scopes":{"models":["a","b"],"allow_passthrough":true},"leases":[{"n":1},{"n":2}],"scopes":{"a":1},"usage":{"x":1},"usage":{"prompt_tokens":{}}}`,
	`{"k\"ey":"v\ud83d\ude00","n":"42","f":"TRUE","x":"1.9"}`,
}

// TestMatchesGJSON holds every Value read from a valid document to what
// gjson reads there.
func TestMatchesGJSON(t *testing.T) {
	for _, s := range seeds {
		compareDoc(t, s)
	}
}

func FuzzMatchesGJSON(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if jsontok.Valid([]byte(s), jsontok.GJSON).Code != jsontok.ErrNone {
			readBroken(t, s)
			return
		}
		compareDoc(t, s)
	})
}

func compareDoc(t *testing.T, s string) {
	t.Helper()
	if jsontok.Valid([]byte(s), jsontok.GJSON).Code != jsontok.ErrNone {
		t.Fatalf("seed %q is not valid JSON", s)
	}
	compare(t, "", Parse(s), gjson.Parse(s), 0)
	if Parse(s).Type != JSON {
		return // gjson reads a path into a string or number by guesses of its own
	}
	for _, p := range []string{"a", "c.3.d", "scopes.models", "leases.1", "leases.1.n", "usage.prompt_tokens", "0", "6"} {
		compare(t, p, Parse(s).Get(p), gjson.Get(s, p), 64)
		compare(t, p, GetBytes([]byte(s), p), gjson.GetBytes([]byte(s), p), 64)
	}
}

func compare(t *testing.T, at string, v Value, g gjson.Result, depth int) {
	t.Helper()
	if v.Type != Type(g.Type) || v.Raw != g.Raw || v.Str != g.Str || v.Index != g.Index ||
		!(v.Num == g.Num || math.IsNaN(v.Num) && math.IsNaN(g.Num)) {
		t.Fatalf("at %q: got %+v, gjson %+v", at, v, g)
	}
	if v.Int() != g.Int() || v.String() != g.String() || v.Bool() != g.Bool() || v.Exists() != g.Exists() ||
		v.IsObject() != g.IsObject() || v.IsArray() != g.IsArray() || len(v.Array()) != len(g.Array()) {
		t.Fatalf("at %q: conversions of %+v differ from gjson's: %d %q %v %v / %d %q %v %v", at, v,
			v.Int(), v.String(), v.Bool(), v.Exists(), g.Int(), g.String(), g.Bool(), g.Exists())
	}
	if depth > 32 {
		return
	}
	var keys []Value
	var vals []Value
	v.ForEach(func(k, e Value) bool {
		keys, vals = append(keys, k), append(vals, e)
		return true
	})
	n := 0
	g.ForEach(func(k, e gjson.Result) bool {
		if n >= len(vals) {
			t.Fatalf("at %q: gjson hands out more than %d members", at, len(vals))
		}
		if v.Type == JSON {
			compare(t, at+"/key", keys[n], k, 64)
		}
		compare(t, at+"/"+k.String(), vals[n], e, depth+1)
		n++
		return true
	})
	if n != len(vals) {
		t.Fatalf("at %q: %d members, gjson %d", at, len(vals), n)
	}
}

// readBroken reads a document that breaks the grammar as the package
// comment says: nothing past the first fault, every member handed out
// whole or cut at the fault, and nothing panics.
func readBroken(t *testing.T, s string) {
	fault := jsontok.Valid([]byte(s), jsontok.GJSON).Off
	var walk func(v Value, depth int)
	walk = func(v Value, depth int) {
		root := depth == 0
		if v.Index+len(v.Raw) > len(s) || v.Raw != s[v.Index:v.Index+len(v.Raw)] {
			t.Fatalf("%+v is not the document's bytes at its index", v)
		}
		if v.Type != JSON && v.Index+len(v.Raw) > fault {
			t.Fatalf("%+v reaches past the fault at %d of %q", v, fault, s)
		}
		if end := v.Index + len(v.Raw); v.Type == JSON && !root && (v.Complete() && end > fault || !v.Complete() && end != fault) {
			t.Fatalf("%q: Complete is %v with the fault at %d of %q", v.Raw, v.Complete(), fault, s)
		}
		if depth > 32 {
			return
		}
		v.ForEach(func(k, e Value) bool {
			walk(e, depth+1)
			return true
		})
		_ = v.Get("a.0").String()
	}
	walk(Parse(s), 0)
}

// TestBrokenDocument is the reading of a document cut short or broken in
// the middle: what stands before the fault is read, a value holding it is
// cut there, nothing after it is read.
func TestBrokenDocument(t *testing.T) {
	doc := `{"model":"m","choices":[{"delta":{"content":"hi"}},{"delta":{"content":"there` +
		`"}}],"usage":{"prompt_tokens":5 "completion_tokens":3},"after":1}`
	root := Parse(doc)
	if got := root.Get("model").Str; got != "m" {
		t.Fatalf("model = %q", got)
	}
	var texts []string
	root.Get("choices").ForEach(func(_, ch Value) bool {
		texts = append(texts, ch.Get("delta.content").Str)
		return true
	})
	if strings.Join(texts, ",") != "hi,there" {
		t.Fatalf("texts = %q", texts)
	}
	u := root.Get("usage")
	if !u.IsObject() || u.Complete() || u.Get("prompt_tokens").Int() != 5 || u.Get("completion_tokens").Exists() {
		t.Fatalf("usage = %+v (complete %v)", u, u.Complete())
	}
	if root.Get("after").Exists() {
		t.Fatal("a member past the fault was read")
	}
	if !root.Get("choices").Complete() {
		t.Fatal("choices, whole before the fault, reads as cut")
	}
}
