package stub

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkHandler measures one answer through ServeHTTP (no network).
func BenchmarkHandler(b *testing.B) {
	for _, bc := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", seedBody},
		{"chat-stream", "/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"What is the capital of Germany?"}]}`},
		{"messages-stream", "/v1/messages", `{"model":"claude-sonnet-4-20250514","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Hello, Claude"}]}`},
		{"embeddings", "/v1/embeddings", `{"model":"text-embedding-3-small","input":"The food was delicious."}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := New(Options{History: -1})
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest("POST", bc.path, strings.NewReader(bc.body))
				w := httptest.NewRecorder()
				s.ServeHTTP(w, r)
				if w.Code != 200 {
					b.Fatal(w.Code)
				}
			}
		})
	}
}
