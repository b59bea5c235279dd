package llm

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// scanUsage feeds body to a UsageScanner in chunks of the given sizes
// (cycled), then reads it.
func scanUsage(path string, body []byte, sizes ...int) (ledger.Usage, string, bool, *UsageScanner) {
	var u UsageScanner
	for i, k := 0, 0; i < len(body); k++ {
		n := len(body)
		if len(sizes) > 0 {
			n = max(sizes[k%len(sizes)], 1)
		}
		end := min(i+n, len(body))
		u.Feed(body[i:end])
		i = end
	}
	us, model, ok := u.Usage(path)
	return us, model, ok, &u
}

// TestUsageScannerReadsWhatParseUsageReads: fed in chunks of any size, the
// scanner reads each answer of testdata/usage and the cases below as
// ParseUsage reads the whole.
func TestUsageScannerReadsWhatParseUsageReads(t *testing.T) {
	bodies := []string{
		`{"model":"gpt-4o","choices":[{"message":{"content":"a \"usage\":{} } ] {"}}],"usage":{"prompt_tokens":3,"completion_tokens":16000}}`,
		`{"usage":{"prompt_tokens":1,"completion_tokens":2},"x":[1,2,{"usage":{"prompt_tokens":9}}],"usage":{"prompt_tokens":4,"completion_tokens":5}}`,
		`{"\u0075sage":{"input_tokens":7,"output_tokens":8},"mod\u0065l":"claude"}`,
		` { "model" : "m" , "n" : 12 , "t" : true , "f":false,"z":null, "usage" : { "prompt_tokens" : 10 } } `,
		`{"model":"m","usage":5}`,
		`{"model":"m"}`,
		`{}`,
		`[{"usage":{"prompt_tokens":1}}]`,
		`{"usage":{"prompt_tokens":1}}trailing`,
		`{"a":"\\","usage":{"prompt_tokens":2,"completion_tokens":3}}`,
		`{"model":1,"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}`,
	}
	files := readUsageFiles(t)
	bodies = append(bodies, files...)
	for i, b := range bodies {
		for _, path := range fuzzPaths {
			wu, wm, wok := ParseUsage(path, []byte(b))
			for _, sizes := range [][]int{nil, {1}, {2, 3}, {7}, {64}} {
				gu, gm, gok, _ := scanUsage(path, []byte(b), sizes...)
				if strings.HasSuffix(b, "trailing") {
					// Past the object the scanner stops reading; ParseUsage
					// refuses the document.
					wu, wm, wok = ParseUsage(path, []byte(strings.TrimSuffix(b, "trailing")))
				}
				if gu != wu || gm != wm || gok != wok {
					t.Errorf("body %d %s, chunks %v: scanner %+v %q %v, ParseUsage %+v %q %v", i, path, sizes, gu, gm, gok, wu, wm, wok)
				}
			}
		}
	}
}

// TestUsageScannerRefusesAnUnfinishedAnswer: an answer cut before its
// closing brace is not read (gjson would read it leniently); the caller
// charges its estimate instead.
func TestUsageScannerRefusesAnUnfinishedAnswer(t *testing.T) {
	for _, b := range []string{`{"usage":{"prompt_tokens":1}`, `{"usage":{"prompt_tokens":1},"x":"`} {
		if u, _, ok, _ := scanUsage("/v1/chat/completions", []byte(b)); ok {
			t.Errorf("%s: read as %+v", b, u)
		}
	}
}

func readUsageFiles(t *testing.T) []string {
	files, err := filepath.Glob("testdata/usage/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no usage files: %v", err)
	}
	var out []string
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// TestUsageScannerReadsAnAnswerPastAnyCopy: a 12 MiB completion whose
// usage follows the text is read in constant memory: the scanner keeps
// the usage and model members, never the text.
func TestUsageScannerReadsAnAnswerPastAnyCopy(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`{"id":"x","model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"`)
	line := strings.Repeat(`word \"quoted\" {[ `, 64)
	for b.Len() < 12<<20 {
		b.WriteString(line)
	}
	b.WriteString(`"}}],"usage":{"prompt_tokens":12,"completion_tokens":16000,"total_tokens":16012}}`)
	u, model, ok, sc := scanUsage("/v1/chat/completions", b.Bytes(), 64<<10, 1000, 3)
	want := ledger.Usage{Input: 12, Output: 16000, Total: 16012}
	if !ok || u != want || model != "gpt-4o-2024-08-06" {
		t.Fatalf("usage %+v model %q ok %v; want %+v", u, model, ok, want)
	}
	if kept := cap(sc.val) + cap(sc.usage) + cap(sc.model) + cap(sc.key); kept > 4<<10 {
		t.Fatalf("the scanner kept %d bytes of buffers for a 12 MiB answer", kept)
	}
}

// FuzzUsageScanner: never panics; on a syntactically valid body, fed in
// any chunking, it reads what ParseUsage reads (a value past the kept
// bound aside).
func FuzzUsageScanner(f *testing.F) {
	addFiles(f, "testdata/usage/*.json", func(b []byte) { f.Add(b, uint8(0), uint8(3)) })
	f.Add([]byte(`{"\u0075sage":{"input_tokens":7,"output_tokens":8},"mod\u0065l":"c"}`), uint8(4), uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, sel, chunk uint8) {
		path := fuzzPaths[int(sel)%len(fuzzPaths)]
		gu, gm, gok, _ := scanUsage(path, body, int(chunk)+1)
		if off, _ := checkSyntax(body); off >= 0 || len(body) > maxScanValue {
			return
		}
		wu, wm, wok := ParseUsage(path, body)
		if gu != wu || gm != wm || gok != wok {
			t.Fatalf("%q: scanner %+v %q %v, ParseUsage %+v %q %v", body, gu, gm, gok, wu, wm, wok)
		}
	})
}
