package jsontok

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/quick"
	"unicode/utf8"
)

// randText is a string of the pieces that need care: escapes, control
// bytes, HTML bytes, multi-byte runes, U+2028, invalid UTF-8, runs longer
// than a word.
func randText(rng *rand.Rand) string {
	pieces := []string{"a", "org:acme/team:ml", "\"", "\\", "\n", "\b", "\f", "\r", "\t", "\x00", "\x1f", "\x7f", "é", "\u2028", "\u2029",
		"\xff", "\xe2\x80", "<>&", "😀", strings.Repeat("x", 9), "\ud7ff", "\U0010ffff", "\xed\xa0\x80"}
	var b strings.Builder
	for k := rng.Intn(12); k > 0; k-- {
		b.WriteString(pieces[rng.Intn(len(pieces))])
	}
	return b.String()
}

// TestAppendStringMatchesEncodingJSON holds both string writers to
// encoding/json (AppendString to an Encoder with HTML escaping off,
// AppendStringHTML to Marshal), at every alignment of the fast prefix, and
// the tokenizer to reading back what they wrote.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 20000; i++ {
		s := randText(rng)
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		got := AppendString([]byte("x"), s)
		if string(got[1:])+"\n" != want.String() {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got[1:], want.String())
		}
		marshalled, _ := json.Marshal(s)
		if html := AppendStringHTML(nil, s); string(html) != string(marshalled) {
			t.Fatalf("AppendStringHTML(%q) = %s, want %s", s, html, marshalled)
		}
		// Read back: one string token, strictly valid, decoding to s with
		// its invalid UTF-8 replaced.
		var tk Tokenizer
		tk.Reset(got[1:], Strict)
		if k := tk.Next().Kind; k != String || tk.Next().Kind != End {
			t.Fatalf("%s does not read back as one string: %+v", got[1:], tk.Err())
		}
		if back := Text(got[1:], true); back != strings.ToValidUTF8(s, "\ufffd") && utf8.ValidString(s) {
			t.Fatalf("%q reads back as %q", s, back)
		}
	}
}

func TestAppendInt(t *testing.T) {
	f := func(v int64, shift uint8) bool {
		v >>= shift % 64
		return string(AppendInt([]byte("x"), v)) == "x"+strconv.FormatInt(v, 10)
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 20000}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []int64{0, 9, 10, -1, math.MaxInt64, math.MinInt64} {
		if !f(v, 0) {
			t.Fatalf("AppendInt(%d)", v)
		}
	}
}

func TestAppendFloatMatchesEncodingJSON(t *testing.T) {
	check := func(f float64) bool {
		got, ok := AppendFloat(nil, f, 64)
		want, err := json.Marshal(f)
		got32, ok32 := AppendFloat(nil, float64(float32(f)), 32)
		want32, err32 := json.Marshal(float32(f))
		return ok == (err == nil) && string(got) == string(want) && ok32 == (err32 == nil) && string(got32) == string(want32)
	}
	if err := quick.Check(check, &quick.Config{MaxCount: 20000}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 0.5, 1e-7, 1e-6, 123456.789, 1e20, 1e21, 5e-324, -2.5e-9, math.MaxFloat64, math.NaN(), math.Inf(-1), 3.4e38} {
		if !check(f) {
			t.Errorf("AppendFloat(%v)", f)
		}
	}
}

// randValue is a random JSON value as encoding/json decodes it with
// UseNumber.
func randValue(rng *rand.Rand, depth int) any {
	k := rng.Intn(8)
	if depth > 5 {
		k = rng.Intn(5)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return rng.Intn(2) == 0
	case 2:
		return json.Number([]string{"0", "-1", "12.5e-3", "1E+9", "-0.0", "123456789012345678901234567890"}[rng.Intn(6)])
	case 3, 4:
		return strings.ToValidUTF8(randText(rng), "\ufffd")
	case 5, 6:
		m := map[string]any{}
		for i := rng.Intn(4); i > 0; i-- {
			m[strings.ToValidUTF8(randText(rng), "\ufffd")] = randValue(rng, depth+1)
		}
		return m
	}
	l := []any{}
	for i := rng.Intn(4); i > 0; i-- {
		l = append(l, randValue(rng, depth+1))
	}
	return l
}

// build reads one value from the tokenizer into encoding/json's tree, on an
// explicit stack.
func build(t *testing.T, tk *Tokenizer, src []byte) any {
	type frame struct {
		obj  map[string]any
		list []any
		key  string
	}
	var stack []frame
	var done any
	add := func(v any) {
		if len(stack) == 0 {
			done = v
			return
		}
		top := &stack[len(stack)-1]
		if top.obj != nil {
			top.obj[top.key] = v
		} else {
			top.list = append(top.list, v)
		}
	}
	for {
		tok := tk.Next()
		k, s, e := tok.Kind, tok.Start, tok.End
		switch k {
		case End:
			return done
		case Err:
			t.Fatalf("%s: %s", src, tk.Err().Error())
		case ObjectStart:
			stack = append(stack, frame{obj: map[string]any{}})
		case ArrayStart:
			stack = append(stack, frame{list: []any{}})
		case ObjectEnd, ArrayEnd:
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if top.obj != nil {
				add(top.obj)
			} else {
				add(top.list)
			}
		case Key:
			stack[len(stack)-1].key = Text(src[s:e], true)
		case String:
			add(Text(src[s:e], true))
		case Number:
			add(json.Number(src[s:e]))
		case True, False:
			add(k == True)
		case Null:
			add(nil)
		}
	}
}

// TestTokensRebuildTheValue: what encoding/json writes of a random value,
// compact or indented, the tokenizer reads back as that value.
func TestTokensRebuildTheValue(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for i := 0; i < 5000; i++ {
		v := randValue(rng, 0)
		doc, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			var ind bytes.Buffer
			json.Indent(&ind, doc, " ", "\t")
			doc = ind.Bytes()
		}
		var tk Tokenizer
		tk.Reset(doc, Strict)
		if got := build(t, &tk, doc); !reflect.DeepEqual(got, v) {
			t.Fatalf("%s:\nread %#v\nwant %#v", doc, got, v)
		}
	}
}
