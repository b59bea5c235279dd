package llm

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tokentriage/tokentriage/shared/jsontok/jv"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

var fuzzPaths = []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses", "/v1/messages"}

func addFiles(f *testing.F, pattern string, add func([]byte)) {
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed files %s", pattern)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		add(b)
	}
}

// FuzzParseRequest: never panics; refuses exactly what gjson.ValidBytes
// refuses (bar nesting beyond MaxDepth); a parsed request is sane; an
// include_usage rewrite parses back with include_usage set.
func FuzzParseRequest(f *testing.F) {
	addFiles(f, "testdata/requests/*.json", func(b []byte) { f.Add(b, uint8(0)) })
	f.Add([]byte(`{"model":"m","stream":true,"stream_options":null}`), uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, sel uint8) {
		path := fuzzPaths[int(sel)%len(fuzzPaths)]
		req, err := ParseRequest(path, body)
		var re *RequestError
		if err != nil {
			var ok bool
			if re, ok = err.(*RequestError); !ok {
				t.Fatalf("error %T %v, want *RequestError", err, err)
			}
			if re.Offset > len(body) {
				t.Fatalf("offset %d beyond the body (%d bytes)", re.Offset, len(body))
			}
		}
		syntaxErr := re != nil && strings.HasPrefix(re.Cause, "invalid JSON: ")
		deep := syntaxErr && strings.Contains(re.Cause, "nesting deeper")
		if !deep && syntaxErr == gjson.ValidBytes(body) {
			t.Fatalf("syntax error %v, gjson.ValidBytes %v", syntaxErr, gjson.ValidBytes(body))
		}
		if err != nil {
			return
		}
		if req.Model == "" || req.PromptBytes < 0 || req.MaxTokens < 0 || Reserve(req) < 0 {
			t.Fatalf("insane request %+v", req)
		}
		if out, changed := InjectIncludeUsage(body); changed {
			again, err := ParseRequest(path, out)
			if err != nil || !again.IncludeUsage || !again.Stream || again.PromptBytes != req.PromptBytes || again.Model != req.Model {
				t.Fatalf("rewrite %s parses as %+v, %v", out, again, err)
			}
		}
	})
}

// FuzzParseUsage: never panics; counts are never negative.
func FuzzParseUsage(f *testing.F) {
	addFiles(f, "testdata/usage/*.json", func(b []byte) { f.Add(b, uint8(0)) })
	for _, u := range countsCases {
		f.Add([]byte(u), uint8(0))
	}
	f.Fuzz(func(t *testing.T, body []byte, sel uint8) {
		u, _, ok := ParseUsage(fuzzPaths[int(sel)%len(fuzzPaths)], body)
		if c, served, have, sure := parseUsageFast(body); sure {
			ep := EndpointOf(fuzzPaths[int(sel)%len(fuzzPaths)])
			wu, wm, wok := parseUsageGJSON(ep, body)
			if have != wok || have && (c.usage(ep) != wu || served != wm) {
				t.Fatalf("%q: one pass %+v %q %v, gjson %+v %q %v", body, c.usage(ep), served, have, wu, wm, wok)
			}
		}
		// The usage reader for checked objects, on the body as a usage
		// object: the same counts as readCounts when the syntax is valid,
		// and no panic whatever the body.
		rc, rok := readCountsRaw(body)
		if off, _ := checkSyntax(body); off < 0 {
			if wc, wok := readCounts(jv.Parse(view(body))); rok != wok || rok && rc != wc {
				t.Fatalf("%q: one pass %+v %v, readCounts %+v %v", body, rc, rok, wc, wok)
			}
		}
		if u.Input < 0 || u.Output < 0 || u.CachedInput < 0 || u.Reasoning < 0 || u.Total < 0 {
			t.Fatalf("negative usage %+v", u)
		}
		if !ok && u != (ledger.Usage{}) {
			t.Fatalf("usage %+v without ok", u)
		}
	})
}

// FuzzStreamScanner: never panics; without stripping the output is the
// input; with or without, output and usage do not depend on chunking.
func FuzzStreamScanner(f *testing.F) {
	addFiles(f, "testdata/streams/*.sse", func(b []byte) {
		for sel := uint8(0); sel < 5; sel++ {
			f.Add(b, sel, int64(sel), true)
		}
	})
	f.Add([]byte("data: {\"choices\":[],\"usage\":{\"total_tokens\":1}}\r"), uint8(0), int64(3), true)
	f.Fuzz(func(t *testing.T, in []byte, sel uint8, seed int64, strip bool) {
		path := fuzzPaths[int(sel)%len(fuzzPaths)]
		whole := scan(path, strip, 10, in)
		if ref := scanGJSON(path, strip, 10, in); !sameResult(whole, ref) {
			t.Fatalf("fast paths: %s\n%q\nwant (gjson)\n%s\n%q", whole, whole.out, ref, ref.out)
		}
		if !strip && !bytes.Equal(whole.out, in) {
			t.Fatalf("forwarded %q, want the input %q", whole.out, in)
		}
		if len(whole.out) > len(in) {
			t.Fatalf("forwarded %d bytes of %d", len(whole.out), len(in))
		}
		u := whole.usage
		if u.Input < 0 || u.Output < 0 || u.Total < 0 {
			t.Fatalf("negative usage %+v", u)
		}
		rng := rand.New(rand.NewSource(seed))
		var cuts []int
		for k := rng.Intn(5); k < len(in); k += 1 + rng.Intn(16) {
			cuts = append(cuts, k)
		}
		if got := scan(path, strip, 10, in, cuts...); !sameResult(got, whole) {
			t.Fatalf("cuts %v: %s\n%q\nwant\n%s\n%q", cuts, got, got.out, whole, whole.out)
		}
		if got, _ := pass(path, strip, 10, in, cuts...); !sameResult(got, whole) {
			t.Fatalf("Pass, cuts %v: %s\n%q\nwant\n%s\n%q", cuts, got, got.out, whole, whole.out)
		}
	})
}
