package llm

import (
	"os"
	"testing"
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
	body, err := os.ReadFile("testdata/usage/chat_basic.json")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := ParseUsage("/v1/chat/completions", body); !ok {
			b.Fatal("no usage")
		}
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
