package jsontok

import (
	"fmt"
	"strings"
	"testing"
)

// tokens renders the tokens of doc as kind:text, then the end or the
// fault.
func tokens(doc string, r Rules) string {
	var t Tokenizer
	t.Reset([]byte(doc), r)
	var out []string
	for {
		tok := t.Next()
		switch tok.Kind {
		case End:
			return strings.Join(append(out, "end"), " ")
		case Err:
			e := t.Err()
			return strings.Join(append(out, fmt.Sprintf("err@%d: %s", e.At(), e.Cause())), " ")
		}
		out = append(out, fmt.Sprintf("%s:%s", kindNames[tok.Kind], doc[tok.Start:tok.End]))
	}
}

var kindNames = map[Kind]string{
	ObjectStart: "{", ObjectEnd: "}", ArrayStart: "[", ArrayEnd: "]",
	Key: "key", String: "str", Number: "num", True: "true", False: "false", Null: "null",
}

func TestTokens(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":[1,-0.5e+3,"x\n"],"b":{},"c":[],"d":null,"e":true,"f":false}`,
			`{:{ key:"a" [:[ num:1 num:-0.5e+3 str:"x\n" ]:] key:"b" {:{ }:} key:"c" [:[ ]:] key:"d" null:null key:"e" true:true key:"f" false:false }:} end`},
		{" \t\r\n7 \n", "num:7 end"},
		{`"top"`, `str:"top" end`},
		{`{ "a" : 1 , "b" : [ 2 , 3 ] }`, `{:{ key:"a" num:1 key:"b" [:[ num:2 num:3 ]:] }:} end`},
		{``, `err@0: unexpected end of input, expecting a value`},
		{`   `, `err@3: unexpected end of input, expecting a value`},
		{`{"a":1,}`, `{:{ key:"a" num:1 err@7: unexpected '}', expecting an object key in double quotes`},
		{`{"a":1`, `{:{ key:"a" num:1 err@6: unexpected end of input, expecting ',' or '}' after an object member`},
		{`[1 2]`, `[:[ num:1 err@3: unexpected '2', expecting ',' or ']' after an array element`},
		{`[1,]`, `[:[ num:1 err@3: unexpected ']', expecting a value`},
		{`{"a" 1}`, `{:{ key:"a" err@5: unexpected '1', expecting ':' after an object key`},
		{`{"a"`, `{:{ key:"a" err@4: unexpected end of input, expecting ':' after an object key`},
		{`{`, `{:{ err@1: unexpected end of input, expecting an object key`},
		{`{1:2}`, `{:{ err@1: unexpected '1', expecting an object key in double quotes`},
		{`[tru]`, `[:[ err@1: invalid literal, expecting true`},
		{`nul`, `err@0: invalid literal, expecting null`},
		{`[01]`, `[:[ num:0 err@2: unexpected '1', expecting ',' or ']' after an array element`},
		{`-`, `err@1: invalid number`},
		{`[1.]`, `[:[ err@3: invalid number`},
		{`1e+`, `err@3: invalid number`},
		{`{"a":1}}`, `{:{ key:"a" num:1 }:} err@7: unexpected '}' after the top-level value`},
		{"\"a\x01\"", "err@2: control character byte 0x01 in a string; escape it"},
		{`"a\x"`, `err@3: invalid escape 'x' in a string`},
		{`"a\`, `err@3: unexpected end of input in a string escape`},
		{`"\u12g4"`, `err@5: invalid \u escape in a string, expecting 4 hexadecimal digits`},
		{`"\u12`, `err@5: invalid \u escape in a string, expecting 4 hexadecimal digits`},
		{`"abc`, `err@4: unexpected end of input in a string`},
		{"\"\xff\"", "str:\"\xff\" end"},
		{"x", "err@0: unexpected 'x', expecting a value"},
		{"\xef\xbb\xbf{}", "err@0: unexpected byte 0xef, expecting a value"},
	} {
		if got := tokens(tc.in, GJSON); got != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

func TestStrictRefusesInvalidUTF8(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"\"\xff\"", "err@1: invalid UTF-8 in a string"},
		{"{\"k\xc3\":1}", "{:{ err@3: invalid UTF-8 in a string"},
		{"\"\xed\xa0\x80\"", "err@1: invalid UTF-8 in a string"}, // a surrogate in UTF-8
		{"\"é😀 and more than eight bytes\"", "str:\"é😀 and more than eight bytes\" end"},
	} {
		if got := tokens(tc.in, Strict); got != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

func TestDepth(t *testing.T) {
	for _, r := range []Rules{GJSON, EncodingJSON, {MaxDepth: 700}, {MaxDepth: 3}} {
		ok := strings.Repeat(`{"a":[`, r.MaxDepth/2) + strings.Repeat(`]}`, r.MaxDepth/2)
		if e := Valid([]byte(ok), r); e.Code != ErrNone {
			t.Errorf("depth %d refused: %v", r.MaxDepth, e.Error())
		}
		deep := strings.Repeat(`[`, r.MaxDepth+1)
		e := Valid([]byte(deep), r)
		if e.Code != ErrDepth || e.Off != r.MaxDepth || e.Cause() != fmt.Sprintf("nesting deeper than %d levels", r.MaxDepth) {
			t.Errorf("depth %d: %+v", r.MaxDepth, e)
		}
	}
	// The bit stack past the Tokenizer's own 512 levels keeps objects and
	// arrays apart.
	doc := strings.Repeat(`[{"a":`, 600) + `1` + strings.Repeat(`}]`, 600)
	if e := Valid([]byte(doc), EncodingJSON); e.Code != ErrNone {
		t.Fatal(e.Error())
	}
	bad := strings.Repeat(`[{"a":`, 600) + `1` + strings.Repeat(`]}`, 600)
	if e := Valid([]byte(bad), EncodingJSON); e.Code != ErrMember || e.Off != 600*6+1 {
		t.Fatalf("%+v", e)
	}
}

func TestSkip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		at   int
		want int
		code Code
	}{
		{`{"a":[1,{"b":"]"}],"c":2}`, 5, 18, ErrNone},
		{`{"a":[1,{"b":"]"}],"c":2}`, 0, 25, ErrNone},
		{` "x" , 1`, 0, 4, ErrNone},
		{`[1,2] trailing`, 0, 5, ErrNone},
		{`7x`, 0, 1, ErrNone},
		{`{"a":[1,}`, 0, 8, ErrValue},
		{`tru`, 0, 3, ErrLiteral},
	} {
		end, e := Skip([]byte(tc.in), tc.at, GJSON)
		if end != tc.want || e.Code != tc.code {
			t.Errorf("Skip(%q, %d) = %d, %d; want %d, %d", tc.in, tc.at, end, e.Code, tc.want, tc.code)
		}
	}
}

func TestSkipValue(t *testing.T) {
	doc := []byte(`{"a":{"x":[1,2]},"b":"s","c":[]}`)
	var tk Tokenizer
	tk.Reset(doc, GJSON)
	var got []string
	if tk.Next().Kind != ObjectStart {
		t.Fatal("no object")
	}
	for {
		key := *tk.Next()
		if key.Kind != Key {
			if key.Kind != ObjectEnd || key.Depth != 0 || tk.Next().Kind != End {
				t.Fatalf("did not end: %+v", key)
			}
			break
		}
		v := tk.SkipValue()
		got = append(got, fmt.Sprintf("%s=%s(%s)", doc[key.Start:key.End], doc[v.Start:v.End], kindNames[v.Kind]))
	}
	if want := `"a"={"x":[1,2]}({) "b"="s"(str) "c"=[]([)`; strings.Join(got, " ") != want {
		t.Fatalf("got %s\nwant %s", strings.Join(got, " "), want)
	}
}

func TestDecodedLen(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want int
	}{
		{`""`, 0}, {`"abc"`, 3}, {`"a\nb"`, 3}, {`"\u00e9"`, 2}, {`"\u20ac"`, 3}, {`"\ud83d\ude00"`, 4},
		{`"\ud83d"`, 3}, {`"\ud83d\u0041"`, 4}, {`"\ude00"`, 3}, {`"é😀"`, 6}, {"\"\xff\"", 1},
		{`"a\`, 1}, {`"\u12"`, 0}, // not tokens: counted as far as their escapes go
	} {
		if got := DecodedLen([]byte(tc.raw)); got != tc.want {
			t.Errorf("DecodedLen(%s) = %d, want %d", tc.raw, got, tc.want)
		}
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct{ raw, goText, gjsonText string }{
		{`"plain"`, "plain", "plain"},
		{`"a\"\\\/\b\f\n\r\t"`, "a\"\\/\b\f\n\r\t", "a\"\\/\b\f\n\r\t"},
		{`"\u00e9\u20AC\ud83d\ude00"`, "é€😀", "é€😀"},
		{`"\ud800x\udc00\ud800\u0041"`, "\ufffdx\ufffd\ufffdA", "\ufffdx\ufffd\ufffdA"},
		{"\"caf\xc3\xa9 \xff\"", "café \ufffd", "café \xff"},
	} {
		if got := Text([]byte(tc.raw), true); got != tc.goText {
			t.Errorf("Text(%s, true) = %q, want %q", tc.raw, got, tc.goText)
		}
		if got := Text([]byte(tc.raw), false); got != tc.gjsonText {
			t.Errorf("Text(%s, false) = %q, want %q", tc.raw, got, tc.gjsonText)
		}
	}
}

func TestReadingDoesNotAllocate(t *testing.T) {
	doc := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"What is the capital of \"Germany\"?\n"}],"max_tokens":256,"stream":true}`)
	var tk Tokenizer
	n := testing.AllocsPerRun(100, func() {
		tk.Reset(doc, Strict)
		for k := tk.Next().Kind; k != End; k = tk.Next().Kind {
			if k == Err {
				t.Fatal(tk.Err().Error())
			}
		}
		if _, e := Skip(doc, 0, GJSON); e.Code != ErrNone {
			t.Fatal(e.Error())
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per read", n)
	}
}

func TestSkipRest(t *testing.T) {
	doc := []byte(`{"a":{"x":[1,{"y":2}],"z":3},"b":4}`)
	var tk Tokenizer
	tk.Reset(doc, GJSON)
	for _, want := range []Kind{ObjectStart, Key, ObjectStart, Key} {
		if k := tk.Next().Kind; k != want {
			t.Fatalf("%v, want %v", k, want)
		}
	}
	if end := tk.SkipRest(); end.Kind != ObjectEnd || end.Start != 27 || end.Depth != 1 {
		t.Fatalf("SkipRest = %+v", end)
	}
	if k := tk.Next(); k.Kind != Key || string(doc[k.Start:k.End]) != `"b"` || k.Depth != 1 {
		t.Fatalf("then %+v", k)
	}
	tk.Next()
	if end := tk.SkipRest(); end.Kind != ObjectEnd || end.Depth != 0 || tk.Next().Kind != End {
		t.Fatalf("the top: %+v", end)
	}
	tk.Reset([]byte(`[1,2,`), GJSON)
	tk.Next()
	if end := tk.SkipRest(); end.Kind != Err || tk.Err().Code != ErrValue {
		t.Fatalf("a cut array: %+v", end)
	}
	// Before any token: the whole value, whatever the Tokenizer read before.
	tk.Reset([]byte(`{"a":[1]}`), GJSON)
	tk.Next()
	tk.Reset([]byte(` [1,{"b":2}] `), GJSON)
	if v := tk.SkipRest(); v.Kind != ArrayStart || v.Start != 1 || v.End != 12 || tk.Next().Kind != End {
		t.Fatalf("SkipRest first = %+v", v)
	}
}
