package jsontok

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// FuzzTokenizer holds the tokenizer to encoding/json, the reference, and to
// gjson where shared/llm must agree with it:
//
//   - under EncodingJSON, a document is valid exactly when json.Valid says
//     so; its tokens are json.Decoder's tokens (strings decoded by
//     Text(raw, true), numbers as their literals); a fault not at the end of
//     the input is the error json.Unmarshal returns, word for word
//     (GoText), at its offset (Off+1), and one at the end is one that
//     encoding/json also finds at the end;
//   - under Strict, valid exactly when json.Valid and utf8.Valid both say so;
//   - under GJSON, valid exactly when gjson.ValidBytes says so (below the
//     depth bound, which gjson does not have), and every string decodes to
//     gjson's Str, DecodedLen its length;
//   - Skip ends where the document's value does.
func FuzzTokenizer(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,-0.5e+3,"x\n\u00e9\ud83d\ude00\ud800"],"b":{},"c":[],"d":null,"e":true,"f":false}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":256,"stream":true}`,
		`[1x]`, `{"a" 1}`, "{\"a\":\"\xff\"}", `tru`, `{"a":-}`, `[1.]`, `[1e]`, `{,}`, `{"a":1,}`, ` `, `"\u12g4"`,
		`"\x"`, "\"a\x01\"", `[01]`, `{"a":1}}`, `12 x`, `[[[]]]`, `{"a":{"b":[{}]}}`, `"\ud800\u0041"`, `nul`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkEncodingJSON(t, b)
		checkStrict(t, b)
		checkGJSON(t, b)
	})
}

func checkEncodingJSON(t *testing.T, b []byte) {
	e := Valid(b, EncodingJSON)
	if valid := json.Valid(b); valid != (e.Code == ErrNone) {
		t.Fatalf("%q: json.Valid %v, tokenizer %+v", b, valid, e)
	}
	if e.Code != ErrNone {
		var v any
		var se *json.SyntaxError
		if err := json.Unmarshal(b, &v); !errors.As(err, &se) {
			t.Fatalf("%q: encoding/json: %v", b, err)
		}
		if e.EOF {
			if se.Offset != int64(len(b)) {
				t.Fatalf("%q: the tokenizer finds the end of the input, encoding/json %v at %d", b, se, se.Offset)
			}
		} else if se.Error() != e.GoText() || se.Offset != int64(e.Off+1) {
			t.Fatalf("%q: encoding/json: %v at %d; tokenizer: %s at %d", b, se, se.Offset, e.GoText(), e.Off+1)
		}
		return
	}
	// The same tokens as encoding/json's Decoder.
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var tk Tokenizer
	tk.Reset(b, EncodingJSON)
	for {
		tok := tk.Next()
		k := tok.Kind
		want, err := d.Token()
		if k == End {
			if err != io.EOF {
				t.Fatalf("%q: the tokenizer ended, encoding/json has %v, %v", b, want, err)
			}
			break
		}
		if err != nil {
			t.Fatalf("%q: encoding/json: %v", b, err)
		}
		s, end := tok.Start, tok.End
		var got any
		switch k {
		case ObjectStart:
			got = json.Delim('{')
		case ObjectEnd:
			got = json.Delim('}')
		case ArrayStart:
			got = json.Delim('[')
		case ArrayEnd:
			got = json.Delim(']')
		case Key, String:
			got = Text(b[s:end], true)
			if l := DecodedLen(b[s:end]); utf8.Valid(b[s:end]) && l != len(got.(string)) {
				t.Fatalf("%q: DecodedLen(%s) = %d, decoded %d bytes", b, b[s:end], l, len(got.(string)))
			}
		case Number:
			got = json.Number(b[s:end])
		case True, False:
			got = k == True
		case Null:
			got = nil
		}
		if got != want {
			t.Fatalf("%q: token %#v (%s), encoding/json %#v", b, got, b[s:end], want)
		}
	}
	// Skip ends where the value does.
	if end, e := Skip(b, 0, EncodingJSON); e.Code != ErrNone || len(bytes.TrimRight(b[end:], " \t\r\n")) != 0 || end > 0 && IsSpace(b[end-1]) {
		t.Fatalf("%q: Skip = %d, %+v", b, end, e)
	}
}

func checkStrict(t *testing.T, b []byte) {
	e := Valid(b, Strict)
	if want := json.Valid(b) && utf8.Valid(b); want != (e.Code == ErrNone) {
		t.Fatalf("%q: json.Valid and utf8.Valid %v, strict tokenizer %+v", b, want, e)
	}
}

func checkGJSON(t *testing.T, b []byte) {
	if bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) >= DefaultMaxDepth {
		return // gjson has no depth bound
	}
	e := Valid(b, GJSON)
	if want := gjson.ValidBytes(b); want != (e.Code == ErrNone) {
		t.Fatalf("%q: gjson.ValidBytes %v, tokenizer %+v", b, want, e)
	}
	if e.Code != ErrNone {
		return
	}
	var tk Tokenizer
	tk.Reset(b, GJSON)
	for tok := tk.Next(); tok.Kind != End; tok = tk.Next() {
		if tok.Kind != String && tok.Kind != Key {
			continue
		}
		raw := b[tok.Start:tok.End]
		want := gjson.ParseBytes(raw).Str
		if got := Text(raw, false); got != want {
			t.Fatalf("%s: Text %q, gjson %q", raw, got, want)
		}
		if tok.DecodedLen() != len(want) || DecodedLen(raw) != len(want) || tok.Escaped() != bytes.Contains(raw, []byte{'\\'}) {
			t.Fatalf("%s: DecodedLen %d and %d, gjson decodes %d bytes", raw, tok.DecodedLen(), DecodedLen(raw), len(want))
		}
	}
}

// TestGoTextNamesWhatEncodingJSONNames is the wording held to
// encoding/json on the faults the fuzz target's seeds do not all reach.
func TestGoTextNamesWhatEncodingJSONNames(t *testing.T) {
	for _, doc := range []string{
		`{"status":tru}`, `[1x]`, `[1 2]`, `{"a" 1}`, `{"a":1,}`, `[1,]`, `{"a":-}`, `{"a":1.}`, `{"a":1e+}`,
		`"\x"`, `"\u12g4"`, "\"a\nb\"", `12 x`, `{"a":1}}`, `{"a":1 "b"}`, `{1:2}`, `'a'`, "[\x7f]", "[\xc3]", `{"a":nulx}`, `[fals]`,
	} {
		e := Valid([]byte(doc), EncodingJSON)
		var v any
		err := json.Unmarshal([]byte(doc), &v)
		var se *json.SyntaxError
		if !errors.As(err, &se) || se.Error() != e.GoText() || se.Offset != int64(e.Off+1) {
			t.Errorf("%q: encoding/json %v at %d; tokenizer %s at %d", doc, err, se.Offset, e.GoText(), e.Off+1)
		}
	}
	if e := Valid([]byte(strings.Repeat("[", 10001)), EncodingJSON); e.GoText() != "exceeded max depth" {
		t.Errorf("depth: %s", e.GoText())
	}
}
