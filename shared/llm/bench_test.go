package llm

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/jsontok/jv"
)

// typicalChat is a chat request as SDKs send it: a system prompt, a short
// exchange, sampling parameters.
var typicalChat = []byte(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a helpful assistant that answers questions about geography concisely and accurately."},{"role":"user","content":"What is the capital of Germany?"},{"role":"assistant","content":"The capital of Germany is Berlin."},{"role":"user","content":"And what is its population, roughly? Answer in one sentence, please."}],"temperature":0.7,"top_p":1,"max_tokens":256,"stream":true,"stream_options":{"include_usage":true},"user":"user-1234"}`)

func BenchmarkParseRequest(b *testing.B) {
	b.SetBytes(int64(len(typicalChat)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRequest("/v1/chat/completions", typicalChat); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseRequestFields reads the chat body with the default
// customer fields (user, safety_identifier, metadata.user_id), as gate 2
// does: in the same pass ("with"), and, as before, ParseRequest then
// Fields ("then").
func BenchmarkParseRequestFields(b *testing.B) {
	paths := []string{"user", "safety_identifier", "metadata.user_id"}
	for _, body := range []struct {
		name string
		b    []byte
	}{{"chat", typicalChat}, {"100KB", promptBody(100 << 10)}} {
		b.Run("with/"+body.name, func(b *testing.B) {
			var out []jv.Value
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if _, out, err = ParseRequestFields("/v1/chat/completions", body.b, paths, out); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("then/"+body.name, func(b *testing.B) {
			var out []jv.Value
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseRequest("/v1/chat/completions", body.b); err != nil {
					b.Fatal(err)
				}
				out = Fields(body.b, paths, out)
			}
		})
	}
}

func BenchmarkInjectIncludeUsage(b *testing.B) {
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"What is the capital of Germany?"}],"stream":true}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, changed := InjectIncludeUsage(body); !changed {
			b.Fatal("not changed")
		}
	}
}

func BenchmarkParseUsage(b *testing.B) {
	small, err := os.ReadFile("testdata/usage/chat_basic.json")
	if err != nil {
		b.Fatal(err)
	}
	// A long answer: the same completion with 8 KB of prose in its
	// message (a paragraph break every 512 bytes, a quoted word in each
	// paragraph) ahead of the usage member.
	para := `Berlin is the capital of \"Germany\" and its largest city. ` + strings.Repeat("It lies on the Spree, in the north-east of the country, and has about 3.9 million people. ", 6)
	long := bytes.Replace(small, []byte(`"content": "`), []byte(`"content": "`+strings.Repeat(para[:508]+`\n\n`, 16)), 1)
	if bytes.Equal(long, small) {
		b.Fatal("chat_basic.json has no content member to lengthen")
	}
	for _, bc := range []struct {
		name string
		body []byte
	}{{"answer", small}, {"answer-8KB", long}} {
		// one-pass is ParseUsage as the filter calls it; gjson is the
		// generic top-level iteration it replaced, on the same body.
		b.Run(bc.name+"/one-pass", func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, ok := ParseUsage("/v1/chat/completions", bc.body); !ok {
					b.Fatal("no usage")
				}
			}
		})
		b.Run(bc.name+"/gjson", func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, ok := parseUsageGJSON(ChatCompletions, bc.body); !ok {
					b.Fatal("no usage")
				}
			}
		})
	}
}

// BenchmarkStreamScanner scans a typical chat stream (11 events) arriving
// in 256-byte chunks, stripping the usage chunk; ns/op is per stream.
func BenchmarkStreamScanner(b *testing.B) {
	for _, bc := range []struct {
		name, file, path string
		strip            bool
	}{
		{"chat-strip", "testdata/streams/chat_strip.sse", "/v1/chat/completions", true},
		{"chat", "testdata/streams/chat_include_usage.sse", "/v1/chat/completions", false},
		{"messages", "testdata/streams/messages.sse", "/v1/messages", false},
	} {
		in, err := os.ReadFile(bc.file)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			out := make([]byte, 0, 1024)
			for b.Loop() {
				s := NewStreamScanner(bc.path, bc.strip)
				for i := 0; i < len(in); i += 256 {
					out = s.Feed(in[i:min(i+256, len(in))], out[:0])
				}
				out = s.Finish(out[:0])
				if u, _ := s.Usage(); u.Total == 0 {
					b.Fatal("no usage")
				}
			}
		})
	}
}

// chatStream is an OpenAI chat stream as include_usage makes it: a role
// chunk, n token chunks, a finish chunk, the usage chunk and [DONE].
func chatStream(n int) [][]byte {
	const head = `data: {"id":"chatcmpl-AzTq9Rl0PL0h3bVmlhcR5Zn0sE1z2","object":"chat.completion.chunk","created":1739186361,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_72ed7ab54c","choices":[`
	events := [][]byte{[]byte(head + `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")}
	words := []string{" The", " capital", " of", " Germany", " is", " Berlin", ".", "\\n"}
	for i := 0; i < n; i++ {
		events = append(events, []byte(head+`{"index":0,"delta":{"content":"`+words[i%len(words)]+`"},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n"))
	}
	events = append(events,
		[]byte(head+`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`+"\n\n"),
		[]byte(head+`],"usage":{"prompt_tokens":14,"completion_tokens":100,"total_tokens":114,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`+"\n\n"),
		[]byte("data: [DONE]\n\n"))
	return events
}

// BenchmarkStreamEvents is the filter's use of the scanner: a chat stream
// of 10 to 1,000 token events, one event per chunk as a provider flushes
// them, through Pass with the usage chunk stripped, on a scanner reused
// from stream to stream; ns/event is per event of the stream. In the
// guest: make bench-guest BENCH=StreamEvents.
func BenchmarkStreamEvents(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		events := chatStream(n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s := NewStreamScanner("/v1/chat/completions", true)
			var dst []byte
			b.ReportAllocs()
			for b.Loop() {
				s.Reset("/v1/chat/completions", true)
				for k, ev := range events {
					out, changed := s.Pass(ev, k == len(events)-1, dst[:0])
					if changed && len(out) > 0 {
						dst = out
					}
				}
				if u, _ := s.Usage(); u.Total != 114 {
					b.Fatalf("usage %+v", u)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(events)), "ns/event")
		})
	}
}
