package jsontok

import (
	"strconv"
	"strings"
	"testing"
)

// Documents of the kinds the project reads.
var (
	benchChat  = []byte(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a helpful assistant that answers questions about geography concisely and accurately."},{"role":"user","content":"What is the capital of Germany?"},{"role":"assistant","content":"The capital of Germany is Berlin."},{"role":"user","content":"And what is its population, roughly? Answer in one sentence, please."}],"temperature":0.7,"top_p":1,"max_tokens":256,"stream":true,"stream_options":{"include_usage":true},"user":"user-1234"}`)
	benchEvent = []byte(`{"id":"chatcmpl-AzTq9Rl0PL0h3bVmlhcR5Zn0sE1z2","object":"chat.completion.chunk","created":1739186361,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_72ed7ab54c","choices":[{"index":0,"delta":{"content":" Berlin"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	benchRow   = []byte(`{"request_id":"tt_e6gbpncee32dbu7y5jpsfr4ax4","start":"2026-08-09T20:44:50.000000000Z","end":"2026-08-09T20:44:51.250000000Z","kid":"k_9f8e7d6c","node":"org:acme/team:ml/user:dev1","endpoint":"/v1/chat/completions","provider":"openai","model":"gpt-4o-mini","model_served":"gpt-4o-mini-2024-07-18","stream":true,"usage":{"input":1200,"output":350,"cached_input":1024,"reasoning":0,"total":1550},"status":200,"decision":"admitted","error_type":"","refused_by":null,"shadow":[],"breached":[],"suspended":[],"estimated":{"input":false,"output":false},"replica":"r1","cost":{"nanos":405000,"unpriced":false,"estimated":false}}`)
)

// promptDoc is a chat body of about size bytes of prose with escapes.
func promptDoc(size int) []byte {
	const para = `The quick brown fox jumps over the lazy dog. \"Quoted words\" and a tab\there; then a new line.\n`
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"`)
	for b.Len() < size-32 {
		b.WriteString(para)
	}
	b.WriteString(`"}],"stream":true}`)
	return []byte(b.String())
}

// BenchmarkTokenizer reads whole documents token by token with Next (chat is a
// 501-byte request body, event an SSE chunk, row a ledger row, 1MB a
// prompt); ns/token is per token.
func BenchmarkTokenizer(b *testing.B) {
	for _, bc := range []struct {
		name string
		doc  []byte
		r    Rules
	}{{"chat", benchChat, GJSON}, {"event", benchEvent, GJSON}, {"row", benchRow, Strict}, {"1MB", promptDoc(1 << 20), GJSON}} {
		b.Run(bc.name, func(b *testing.B) {
			var t Tokenizer
			b.SetBytes(int64(len(bc.doc)))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				t.Reset(bc.doc, bc.r)
				for k := t.Next().Kind; k != End; k = t.Next().Kind {
					if k == Err {
						b.Fatal(t.Err().Error())
					}
					n++
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/token")
		})
	}
}

// BenchmarkSkip skips the same documents whole.
func BenchmarkSkip(b *testing.B) {
	for _, bc := range []struct {
		name string
		doc  []byte
	}{{"chat", benchChat}, {"event", benchEvent}, {"1MB", promptDoc(1 << 20)}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, e := Skip(bc.doc, 0, GJSON); e.Code != ErrNone {
					b.Fatal(e.Error())
				}
			}
		})
	}
}

// BenchmarkAppendString writes a plain identifier and a prompt line with
// escapes.
func BenchmarkAppendString(b *testing.B) {
	for _, s := range []string{"org:acme/team:ml/user:dev1", "What is \"the\" capital of Germany?\n" + strconv.Quote("é")} {
		b.Run(strconv.Itoa(len(s)), func(b *testing.B) {
			buf := make([]byte, 0, 256)
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendString(buf[:0], s)
			}
		})
	}
}
