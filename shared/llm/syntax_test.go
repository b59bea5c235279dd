package llm

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestCheckSyntaxMatchesGJSON checks the iterative validator against
// gjson.ValidBytes, the reference, on generated documents and mutations of
// them.
func TestCheckSyntaxMatchesGJSON(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	alphabet := []byte(`{}[]:,"\ntrufalsenul0123456789-+.eE abcuU` + "\t\r\n\x01")
	for n := 0; n < 20000; n++ {
		doc := []byte(randomJSON(rng, 0))
		if n%2 == 1 { // mutate a valid document
			for k := rng.Intn(3); k >= 0 && len(doc) > 0; k-- {
				i := rng.Intn(len(doc))
				switch rng.Intn(3) {
				case 0:
					doc[i] = alphabet[rng.Intn(len(alphabet))]
				case 1:
					doc = append(doc[:i], doc[i+1:]...)
				default:
					doc = append(doc[:i], append([]byte{alphabet[rng.Intn(len(alphabet))]}, doc[i:]...)...)
				}
			}
		}
		off, cause := checkSyntax(doc)
		if (off < 0) != gjson.ValidBytes(doc) {
			t.Fatalf("%q: checkSyntax = %d %q, gjson.ValidBytes = %v", doc, off, cause, gjson.ValidBytes(doc))
		}
		if off > len(doc) {
			t.Fatalf("%q: offset %d beyond the end", doc, off)
		}
	}
}

// TestCheckSyntaxWording holds the offset and wording of each refusal a
// request body's syntax gets (a 400's message quotes them) to what they
// have been since before the tokenizer read bodies.
func TestCheckSyntaxWording(t *testing.T) {
	for _, c := range []struct {
		doc   string
		off   int
		cause string
	}{
		{"", 0, "unexpected end of input, expecting a value"},
		{" ", 1, "unexpected end of input, expecting a value"},
		{"}", 0, "unexpected '}', expecting a value"},
		{"{", 1, "unexpected end of input, expecting an object key"},
		{"{1", 1, "unexpected '1', expecting an object key in double quotes"},
		{"{\"a\"", 4, "unexpected end of input, expecting ':' after an object key"},
		{"{\"a\" 1", 5, "unexpected '1', expecting ':' after an object key"},
		{"{\"a\":", 5, "unexpected end of input, expecting a value"},
		{"[1", 2, "unexpected end of input, expecting ',' or ']' after an array element"},
		{"[1 2", 3, "unexpected '2', expecting ',' or ']' after an array element"},
		{"{\"a\":1", 6, "unexpected end of input, expecting ',' or '}' after an object member"},
		{"{\"a\":1 \"b\"", 7, "unexpected '\"', expecting ',' or '}' after an object member"},
		{"{} x", 3, "unexpected 'x' after the top-level value"},
		{"tru", 0, "invalid literal, expecting true"},
		{"[nul]", 1, "invalid literal, expecting null"},
		{"falsy", 0, "invalid literal, expecting false"},
		{"-", 1, "invalid number"},
		{"01", 1, "unexpected '1' after the top-level value"},
		{"1.", 2, "invalid number"},
		{"1.x", 2, "invalid number"},
		{"1e", 2, "invalid number"},
		{"1e+", 3, "invalid number"},
		{"\"a\x01\"", 2, "control character byte 0x01 in a string; escape it"},
		{"\"a\\", 3, "unexpected end of input in a string escape"},
		{"\"a\\q\"", 3, "invalid escape 'q' in a string"},
		{"\"\\u12x4\"", 5, "invalid \\u escape in a string, expecting 4 hexadecimal digits"},
		{"\"\\u12", 5, "invalid \\u escape in a string, expecting 4 hexadecimal digits"},
		{"\"abc", 4, "unexpected end of input in a string"},
		{"{\"a\":1,}", 7, "unexpected '}', expecting an object key in double quotes"},
		{"[1,]", 3, "unexpected ']', expecting a value"},
		{"\xff", 0, "unexpected byte 0xff, expecting a value"},
		{"{\"é\":1,\"b\":[\x7f", 13, "unexpected byte 0x7f, expecting a value"},
	} {
		if off, cause := checkSyntax([]byte(c.doc)); off != c.off || cause != c.cause {
			t.Errorf("%q: %d %q, want %d %q", c.doc, off, cause, c.off, c.cause)
		}
	}
}

func TestCheckSyntaxDepth(t *testing.T) {
	ok := strings.Repeat(`{"a":[`, MaxDepth/2) + strings.Repeat(`]}`, MaxDepth/2)
	if off, cause := checkSyntax([]byte(ok)); off >= 0 {
		t.Fatalf("depth %d refused at %d: %s", MaxDepth, off, cause)
	}
	deep := strings.Repeat(`[`, 1<<20)
	if off, _ := checkSyntax([]byte(deep)); off != MaxDepth {
		t.Fatalf("deep nesting refused at %d, want %d", off, MaxDepth)
	}
}

func randomJSON(rng *rand.Rand, depth int) string {
	k := rng.Intn(9)
	if depth > 4 {
		k = rng.Intn(6)
	}
	switch k {
	case 0:
		return "null"
	case 1:
		return "true"
	case 2:
		return []string{"0", "-1", "12.5e-3", "1E+9", "-0.0"}[rng.Intn(5)]
	case 3:
		return []string{`""`, `"a"`, `"\n\"\\"`, `"\u00e9\ud83d\ude00"`, `"é"`}[rng.Intn(5)]
	case 4, 5:
		return " false "
	case 6, 7:
		var b strings.Builder
		b.WriteString("{")
		for i := rng.Intn(4); i > 0; i-- {
			b.WriteString(`"k":`)
			b.WriteString(randomJSON(rng, depth+1))
			if i > 1 {
				b.WriteString(",")
			}
		}
		b.WriteString("}")
		return b.String()
	}
	var b strings.Builder
	b.WriteString("[ ")
	for i := rng.Intn(4); i > 0; i-- {
		b.WriteString(randomJSON(rng, depth+1))
		if i > 1 {
			b.WriteString(", ")
		}
	}
	b.WriteString("]")
	return b.String()
}
