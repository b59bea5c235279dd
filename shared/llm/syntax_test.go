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
