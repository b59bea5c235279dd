package llm

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// referenceStrip is the obvious, whole-input version of what a stripping
// scanner forwards: split the stream into events at blank lines (LF, CRLF
// or CR line endings), drop each complete event whose data is a valid JSON
// object with an empty choices array and a usage object with counts, keep
// everything else.
func referenceStrip(in []byte) []byte {
	var out []byte
	start, i := 0, 0
	lineEmpty := true
	for i < len(in) {
		c := in[i]
		if c != '\r' && c != '\n' {
			lineEmpty = false
			i++
			continue
		}
		if c == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		i++
		if lineEmpty {
			ev := in[start:i]
			if !usageOnly(ev) {
				out = append(out, ev...)
			}
			start = i
		}
		lineEmpty = true
	}
	return append(out, in[start:]...)
}

func usageOnly(ev []byte) bool {
	var data []string
	for _, line := range strings.FieldsFunc(string(ev), func(r rune) bool { return r == '\r' || r == '\n' }) {
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(v, " "))
		}
	}
	d := strings.Join(data, "\n")
	if !gjson.Valid(d) {
		return false
	}
	choices, usage := gjson.Get(d, "choices"), gjson.Get(d, "usage")
	if !choices.IsArray() || len(choices.Array()) != 0 || !usage.IsObject() {
		return false
	}
	return usage.Get("prompt_tokens").Exists() || usage.Get("completion_tokens").Exists() || usage.Get("total_tokens").Exists()
}

// TestStreamAgainstReference compares the chunked scanner with
// referenceStrip on generated streams full of CRs, LFs, comments, usage
// chunks and near misses.
func TestStreamAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	lines := []string{
		`data: {"choices":[{"delta":{"content":"abcd"}}]}`,
		`data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`,
		`data: {"choices":[],"usage":null}`,
		`data: {"choices":[{}],"usage":{"total_tokens":8}}`,
		`data: {"choices":[],"usage":{"total_tokens":8}}x`,
		`data:{"choices":[],`,
		`data: "usage":{"total_tokens":2}}`,
		`data: [DONE]`,
		`: keep-alive`,
		`event: chunk`,
		`id: 1`,
		``,
	}
	ends := []string{"\n", "\r\n", "\r", "\n\n", "\r\n\r\n"}
	stripped := 0
	for n := 0; n < 3000; n++ {
		var b strings.Builder
		for k := rng.Intn(12); k >= 0; k-- {
			b.WriteString(lines[rng.Intn(len(lines))])
			b.WriteString(ends[rng.Intn(len(ends))])
		}
		if rng.Intn(4) == 0 {
			b.WriteString(lines[rng.Intn(len(lines))]) // unterminated tail
		}
		in := []byte(b.String())
		want := referenceStrip(in)
		var cuts []int
		for k := rng.Intn(4); k < len(in); k += 1 + rng.Intn(9) {
			cuts = append(cuts, k)
		}
		got := scan("/v1/chat/completions", true, 0, in, cuts...)
		if passed, _ := pass("/v1/chat/completions", true, 0, in, cuts...); !sameResult(passed, got) {
			t.Fatalf("stream %q cut at %v: Pass forwarded %q, Feed %q", in, cuts, passed.out, got.out)
		}
		stripped += got.stripped
		if !bytes.Equal(got.out, want) {
			t.Fatalf("stream %q cut at %v:\n got  %q\n want %q", in, cuts, got.out, want)
		}
		if plain := scan("/v1/chat/completions", false, 0, in, cuts...); !bytes.Equal(plain.out, in) || plain.usage != got.usage {
			t.Fatalf("stream %q: without stripping forwarded %q usage %+v (stripping: %+v)", in, plain.out, plain.usage, got.usage)
		}
	}
	if stripped < 100 {
		t.Fatalf("only %d usage chunks stripped in 3000 streams; the generator misses the case", stripped)
	}
}
