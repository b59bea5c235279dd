package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// scanResult is everything a scanner reports about one stream.
type scanResult struct {
	out       []byte
	usage     ledger.Usage
	est       ledger.Estimated
	model     string
	textBytes int64
	stripped  int
}

func (r scanResult) String() string {
	u, _ := json.Marshal(r.usage)
	e, _ := json.Marshal(r.est)
	return fmt.Sprintf("usage: %s\nestimated: %s\nmodel_served: %s\ntext_bytes: %d\nstripped: %d", u, e, r.model, r.textBytes, r.stripped)
}

// scan feeds in to a new scanner cut at the given offsets.
func scan(path string, strip bool, promptBytes int64, in []byte, cuts ...int) scanResult {
	return scanWith(NewStreamScanner(path, strip), promptBytes, in, cuts...)
}

// scanGJSON is scan with every event read through gjson: the reading the
// fast paths (the event walk and the shape) must reproduce.
func scanGJSON(path string, strip bool, promptBytes int64, in []byte) scanResult {
	s := NewStreamScanner(path, strip)
	s.gjsonOnly = true
	return scanWith(s, promptBytes, in)
}

func scanWith(s *StreamScanner, promptBytes int64, in []byte, cuts ...int) scanResult {
	s.SetPromptBytes(promptBytes)
	var out []byte
	prev := 0
	for _, c := range cuts {
		out = s.Feed(in[prev:c], out)
		prev = c
	}
	out = s.Feed(in[prev:], out)
	out = s.Finish(out)
	u, est := s.Usage()
	return scanResult{out: out, usage: u, est: est, model: s.Model(), textBytes: s.textBytes, stripped: s.Stripped()}
}

// pass is scan through Pass, as the filter calls it: a chunk forwarded
// unchanged is taken as is, the end of the stream rides on the last chunk.
// copies counts the chunks whose bytes Pass had to copy.
func pass(path string, strip bool, promptBytes int64, in []byte, cuts ...int) (r scanResult, copies int) {
	s := NewStreamScanner(path, strip)
	s.SetPromptBytes(promptBytes)
	var out, dst []byte
	prev := 0
	for k := 0; k <= len(cuts); k++ {
		end := len(in)
		if k < len(cuts) {
			end = cuts[k]
		}
		chunk := in[prev:end]
		got, changed := s.Pass(chunk, k == len(cuts), dst[:0])
		switch {
		case !changed:
			if len(got) != len(chunk) || len(chunk) > 0 && &got[0] != &chunk[0] {
				panic("Pass: unchanged but not the chunk")
			}
		case len(got) == 0 || &got[0] == &chunk[0]: // a prefix
		default:
			copies++
			dst = got
		}
		out = append(out, got...)
		prev = end
	}
	u, est := s.Usage()
	return scanResult{out: out, usage: u, est: est, model: s.Model(), textBytes: s.textBytes, stripped: s.Stripped()}, copies
}

// TestStreamPassCopiesNothing: a stream that arrives an event per chunk is
// forwarded without a copy, its usage chunk as an empty prefix; without
// stripping nothing is ever copied.
func TestStreamPassCopiesNothing(t *testing.T) {
	in, err := os.ReadFile("testdata/streams/chat_strip.sse")
	if err != nil {
		t.Fatal(err)
	}
	var cuts []int
	for i := 0; i+1 < len(in); i++ {
		if in[i] == '\n' && in[i+1] == '\n' {
			cuts = append(cuts, i+2)
		}
	}
	for _, strip := range []bool{true, false} {
		got, copies := pass("/v1/chat/completions", strip, 0, in, cuts...)
		if want := scan("/v1/chat/completions", strip, 0, in); !sameResult(got, want) {
			t.Fatalf("strip %v: Pass read %s, Feed %s", strip, got, want)
		}
		if copies != 0 {
			t.Fatalf("strip %v: %d chunks copied, want none", strip, copies)
		}
	}
	// Cut inside events: held bytes are copied, never lost.
	got, copies := pass("/v1/chat/completions", true, 0, in, 100, 400, 401, 900)
	if want := scan("/v1/chat/completions", true, 0, in); !sameResult(got, want) || copies == 0 {
		t.Fatalf("cut inside events: Pass read %s (%d copies), Feed %s", got, copies, want)
	}
}

func sameResult(a, b scanResult) bool {
	return bytes.Equal(a.out, b.out) && a.usage == b.usage && a.est == b.est &&
		a.model == b.model && a.textBytes == b.textBytes && a.stripped == b.stripped
}

// TestStreamGolden runs every testdata/streams/*.sse through a scanner;
// names containing "strip" strip the usage chunk.
func TestStreamGolden(t *testing.T) {
	for _, fx := range fixtures(t, "streams", ".sse") {
		file, in, path := fx.file, fx.body, fx.path
		strip := strings.Contains(file, "strip")
		r := scan(path, strip, 31, in)
		var out strings.Builder
		fmt.Fprintf(&out, "POST %s strip=%v\n%s\n", path, strip, r)
		if bytes.Equal(r.out, in) {
			fmt.Fprintf(&out, "forwarded: the input, byte for byte\n")
		} else {
			fmt.Fprintf(&out, "forwarded (%d of %d bytes):\n%s", len(r.out), len(in), r.out)
		}
		checkGolden(t, file, &out)

		// One cut at every byte boundary, and one byte at a time: the
		// result never depends on how the stream was chunked.
		for k := 0; k <= len(in); k++ {
			if got := scan(path, strip, 31, in, k); !sameResult(got, r) {
				t.Fatalf("%s cut at byte %d:\n%s\nforwarded %q\nwant\n%s", file, k, got, got.out, r)
			}
		}
		cuts := make([]int, 0, len(in))
		for k := 1; k < len(in); k++ {
			cuts = append(cuts, k)
		}
		if got := scan(path, strip, 31, in, cuts...); !sameResult(got, r) {
			t.Fatalf("%s one byte at a time:\n%s\nwant\n%s", file, got, r)
		}
	}
}

// TestStreamReset: a scanner reset after one stream reads the next exactly
// as a new scanner does, whatever the endpoints.
func TestStreamReset(t *testing.T) {
	fxs := fixtures(t, "streams", ".sse")
	s := NewStreamScanner("/v1/chat/completions", true)
	for i := 0; i < 3*len(fxs); i++ {
		fx := fxs[(i*7)%len(fxs)]
		file, in, path := fx.file, fx.body, fx.path
		strip := strings.Contains(file, "strip")
		want := scan(path, strip, 31, in, 100, 200)
		s.Reset(path, strip)
		s.SetPromptBytes(31)
		out := s.Feed(in[:100], nil)
		out = s.Feed(in[100:200], out)
		out = s.Feed(in[200:], out)
		out = s.Finish(out)
		u, est := s.Usage()
		got := scanResult{out: out, usage: u, est: est, model: s.Model(), textBytes: s.textBytes, stripped: s.Stripped()}
		if !sameResult(got, want) {
			t.Fatalf("%s after a reset: %s\nwant %s", file, got, want)
		}
	}
}

// TestStreamStripRemovesOnlyTheUsageChunk checks the stripped output is the
// input minus exactly the usage-only event.
func TestStreamStripRemovesOnlyTheUsageChunk(t *testing.T) {
	in, err := os.ReadFile("testdata/streams/chat_strip.sse")
	if err != nil {
		t.Fatal(err)
	}
	events := bytes.SplitAfter(in, []byte("\n\n"))
	var want []byte
	removed := 0
	for _, ev := range events {
		if bytes.Contains(ev, []byte(`"choices":[]`)) && bytes.Contains(ev, []byte(`"usage":{`)) {
			removed++
			continue
		}
		want = append(want, ev...)
	}
	if removed != 1 {
		t.Fatalf("fixture has %d usage-only chunks, want 1", removed)
	}
	r := scan("/v1/chat/completions", true, 0, in)
	if !bytes.Equal(r.out, want) {
		t.Fatalf("forwarded\n%s\nwant\n%s", r.out, want)
	}
	if !bytes.HasSuffix(r.out, []byte("data: [DONE]\n\n")) {
		t.Fatal("data: [DONE] was not forwarded")
	}
	if r.usage.Total != 23 || r.est != (ledger.Estimated{}) {
		t.Fatalf("usage %+v estimated %+v, want the reported total 23", r.usage, r.est)
	}
}

// TestStreamStripOnlyOnOpenAI checks that strip has no effect elsewhere.
func TestStreamStripOnlyOnOpenAI(t *testing.T) {
	for _, path := range []string{"/v1/messages", "/v1/responses", "/v1/embeddings", "/nope"} {
		in := []byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\n\n")
		if r := scan(path, true, 0, in); !bytes.Equal(r.out, in) {
			t.Errorf("%s: forwarded %q, want the input", path, r.out)
		}
	}
}

// TestStreamStripNeedsValidJSON: a chunk that only looks like the usage
// chunk is forwarded.
func TestStreamStripNeedsValidJSON(t *testing.T) {
	in := []byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}x\n\n")
	r := scan("/v1/chat/completions", true, 0, in)
	if !bytes.Equal(r.out, in) {
		t.Fatalf("forwarded %q, want the input", r.out)
	}
}

// TestStreamLineEndings checks CR, LF and CRLF event boundaries, comments,
// multi-line data and an unterminated last event.
func TestStreamLineEndings(t *testing.T) {
	chunk := `{"choices":[{"delta":{"content":"abcd"}}]}`
	usage := `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
	for i, tc := range []struct {
		in, want string
		text     int64
		total    int64
	}{
		{"data: " + chunk + "\r\rdata: " + usage + "\r\r", "data: " + chunk + "\r\r", 4, 4},
		{"data: " + chunk + "\r\n\r\ndata: " + usage + "\r\n\r\n", "data: " + chunk + "\r\n\r\n", 4, 4},
		{"data: " + chunk + "\n\r\ndata: " + usage + "\r\n\n", "data: " + chunk + "\n\r\n", 4, 4},
		{": ping\n\ndata: " + chunk + "\n\n", ": ping\n\ndata: " + chunk + "\n\n", 4, 1},
		{"data: {\"choices\":[],\n" + "data: \"usage\":{\"total_tokens\":9}}\n\n", "", 0, 9},
		{"event: x\nid: 7\nretry: 10\ndata: " + usage, "event: x\nid: 7\nretry: 10\ndata: " + usage, 0, 4},
		{"data: " + usage + "\r", "data: " + usage + "\r", 0, 4},
		{"data: " + usage + "\n\r", "", 0, 4},
		{"\n\n\r\n", "\n\n\r\n", 0, 0},
		{"data:" + usage + "\n\n", "", 0, 4},
	} {
		r := scan("/v1/chat/completions", true, 0, []byte(tc.in))
		if string(r.out) != tc.want || r.textBytes != tc.text || r.usage.Total != tc.total {
			t.Errorf("case %d: forwarded %q, text %d, total %d; want %q, %d, %d", i, r.out, r.textBytes, r.usage.Total, tc.want, tc.text, tc.total)
		}
	}
}

// TestStreamEstimates checks estimated usage when no usage arrives.
func TestStreamEstimates(t *testing.T) {
	in, err := os.ReadFile("testdata/streams/chat_no_usage.sse")
	if err != nil {
		t.Fatal(err)
	}
	r := scan("/v1/chat/completions", false, 31, in)
	want := ledger.Usage{Input: 8, Output: EstimateTokens(r.textBytes), Total: 8 + EstimateTokens(r.textBytes)}
	if r.usage != want || r.est != (ledger.Estimated{Input: true, Output: true}) {
		t.Fatalf("got %+v %+v, want %+v estimated", r.usage, r.est, want)
	}

	cut, err := os.ReadFile("testdata/streams/messages_cut.sse")
	if err != nil {
		t.Fatal(err)
	}
	r = scan("/v1/messages", false, 31, cut)
	if r.est != (ledger.Estimated{Output: true}) || r.usage.Input != 25+2048 || r.usage.CachedInput != 2048 {
		t.Fatalf("cut Anthropic stream: %+v %+v; want input 2073 reported, output estimated", r.usage, r.est)
	}
}

// TestStreamOversizedEvent checks that an event beyond MaxEventBytes is
// forwarded as it arrives, not held, and that its trailing usage is read.
func TestStreamOversizedEvent(t *testing.T) {
	text := strings.Repeat("abcd", MaxEventBytes/4)
	big := `data: {"type":"response.completed","response":{"model":"gpt-4.1","output":[{"content":[{"text":"` + text +
		`"}]}],"usage":{"input_tokens":5,"output_tokens":16384,"total_tokens":16389},"user":null}}` + "\n\n"
	in := []byte("data: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n" + big)
	r := scan("/v1/responses", false, 0, in)
	if r.usage.Total != 16389 || r.est.Output || r.textBytes != 2 {
		t.Fatalf("got %+v %+v text %d; want total 16389 reported, text 2", r.usage, r.est, r.textBytes)
	}
	for _, k := range []int{1, 100, len(in) / 2, len(in) - 3, len(in) - 1} {
		if got := scan("/v1/responses", false, 0, in, k); !sameResult(got, r) {
			t.Fatalf("cut at %d: %s, want %s", k, got, r)
		}
	}
	var small []int
	for k := 7; k < len(in); k += 7 {
		small = append(small, k)
	}
	if got := scan("/v1/responses", true, 0, in, small...); !sameResult(got, r) {
		t.Fatalf("7-byte chunks: %s, want %s", got, r)
	}

	// With stripping, an event is held until it outgrows MaxEventBytes,
	// then forwarded as it arrives.
	chat := []byte(`data: {"choices":[{"delta":{"content":"` + text + text + `"}}]}` + "\n\n")
	s := NewStreamScanner("/v1/chat/completions", true)
	half := MaxEventBytes + 10
	out := s.Feed(chat[:half], nil)
	if !bytes.Equal(out, chat[:half]) {
		t.Fatalf("held %d bytes of an oversized event, want all %d forwarded", half-len(out), half)
	}
	out = s.Feed(chat[half:], out)
	out = s.Finish(out)
	if !bytes.Equal(out, chat) {
		t.Fatal("oversized event not forwarded byte for byte")
	}
	if cap(s.held) > MaxEventBytes {
		t.Fatalf("held buffer grew to %d bytes", cap(s.held))
	}
}

// TestStreamRandomChunking feeds every fixture in random chunks.
func TestStreamRandomChunking(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, fx := range fixtures(t, "streams", ".sse") {
		file, in, path := fx.file, fx.body, fx.path
		strip := strings.Contains(file, "strip")
		want := scanGJSON(path, strip, 0, in)
		if got := scan(path, strip, 0, in); !sameResult(got, want) {
			t.Fatalf("%s whole: %s, want (gjson) %s", file, got, want)
		}
		for n := 0; n < 200; n++ {
			var cuts []int
			for k := rng.Intn(7); k < len(in); k += 1 + rng.Intn(60) {
				cuts = append(cuts, k)
			}
			if got := scan(path, strip, 0, in, cuts...); !sameResult(got, want) {
				t.Fatalf("%s cuts %v: %s, want %s", file, cuts, got, want)
			}
		}
	}
}

// TestLineStop checks the eight-byte scan against a byte loop.
func TestLineStop(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	alphabet := []byte("ab\r\n\x00\x8a\x8d\xff")
	for n := 0; n < 20000; n++ {
		b := make([]byte, rng.Intn(40))
		for k := range b {
			b[k] = alphabet[rng.Intn(len(alphabet))]
		}
		want := 0
		for want < len(b) && b[want] != '\n' && b[want] != '\r' {
			want++
		}
		if got := lineStop(b); got != want {
			t.Fatalf("lineStop(%q) = %d, want %d", b, got, want)
		}
	}
}

// TestStreamMalformedUsageIsEstimated: a usage chunk or event whose counts
// are strings, negatives or fractions is no usage: the stream is estimated
// from the prompt and the streamed text, as when the provider reports
// none, and flagged; never read as an exact 0. Both readings (the fast
// paths and gjson) agree.
func TestStreamMalformedUsageIsEstimated(t *testing.T) {
	chat := func(usage string) string {
		return "data: {\"id\":\"c1\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello there, friend\"}}]}\n\n" +
			"data: {\"id\":\"c1\",\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":" + usage + "}\n\n" +
			"data: [DONE]\n\n"
	}
	msgs := func(start, delta string) string {
		return "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-3-5-haiku-latest\",\"usage\":" + start + "}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello there, friend\"}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":" + delta + "}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	}
	both := ledger.Estimated{Input: true, Output: true}
	for i, c := range []struct {
		path, in string
		est      ledger.Estimated
		usage    ledger.Usage
	}{
		{"/v1/chat/completions", chat(`{"prompt_tokens":"ten","completion_tokens":5,"total_tokens":15}`), both, ledger.Usage{Input: 8, Output: 5, Total: 13}},
		{"/v1/chat/completions", chat(`{"prompt_tokens":-5,"completion_tokens":5,"total_tokens":0}`), both, ledger.Usage{Input: 8, Output: 5, Total: 13}},
		{"/v1/chat/completions", chat(`{"prompt_tokens":10,"completion_tokens":4.5,"total_tokens":14.5}`), both, ledger.Usage{Input: 8, Output: 5, Total: 13}},
		{"/v1/chat/completions", chat(`{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}`), ledger.Estimated{}, ledger.Usage{Input: 10, Output: 5, Total: 15}},
		{"/v1/messages", msgs(`{"input_tokens":"10","output_tokens":1}`, `{"output_tokens":7}`), ledger.Estimated{Input: true}, ledger.Usage{Input: 8, Output: 7, Total: 15}},
		// message_start's output count is a placeholder; the final one is
		// message_delta's, and when that is malformed the output is
		// estimated.
		{"/v1/messages", msgs(`{"input_tokens":10,"output_tokens":1}`, `{"output_tokens":-7}`), ledger.Estimated{Output: true}, ledger.Usage{Input: 10, Output: 5, Total: 15}},
		{"/v1/messages", msgs(`{"input_tokens":10,"cache_read_input_tokens":"x"}`, `{"output_tokens":"seven"}`), both, ledger.Usage{Input: 8, Output: 5, Total: 13}},
	} {
		for _, r := range []scanResult{scan(c.path, false, 31, []byte(c.in)), scanGJSON(c.path, false, 31, []byte(c.in))} {
			if r.usage != c.usage || r.est != c.est {
				t.Errorf("step %d: %+v %+v, want %+v %+v", i, r.usage, r.est, c.usage, c.est)
			}
		}
	}
}
