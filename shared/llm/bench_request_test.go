package llm

import (
	"strconv"
	"testing"

	"github.com/tokentriage/tokentriage/internal/testkit"
)

// promptBody is a streaming chat body of about size bytes: a system
// prompt, then one user message of prose with the escapes a pasted
// document brings (newlines, quotes, a tab now and then).
func promptBody(size int) []byte {
	return testkit.ProseChat(size-64, `"}],"max_tokens":256,"stream":true}`)
}

// BenchmarkParseRequestSize reads chat bodies of 1 KB to 8 MB in one pass
// ("scan") and, for comparison in the same run, as the reading before it
// did ("gjson": checkSyntax, then gjson's iterators), and reports the cost
// per body byte. In the guest:
//
//	make bench-guest PKG=./shared/llm BENCH=ParseRequestSize
func BenchmarkParseRequestSize(b *testing.B) {
	for _, size := range []int{1 << 10, 100 << 10, 1 << 20, 8 << 20} {
		body := promptBody(size)
		for _, how := range []string{"scan", "gjson"} {
			b.Run(how+"/"+sizeName(size), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					var err *RequestError
					if how == "scan" {
						_, err = parseRequest(ChatCompletions, body)
					} else {
						_, err = parseRequestGJSON(ChatCompletions, body)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(body)), "ns/byte")
			})
		}
	}
}

// BenchmarkRewriteRequest is gate 2's rewrites of a 100 KB streaming body
// that set neither an output maximum below the budget's nor include_usage:
// reusing the parse ("noted") against reading the body again ("read").
func BenchmarkRewriteRequest(b *testing.B) {
	body := promptBody(100 << 10)
	for _, how := range []string{"noted", "read"} {
		b.Run(how, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				req, err := ParseRequest("/v1/chat/completions", body)
				if err != nil {
					b.Fatal(err)
				}
				var nb []byte
				if how == "noted" {
					nb, _ = req.SetOutputMax(body, 100)
					nb, _ = req.InjectIncludeUsage(nb)
				} else {
					nb, _ = SetOutputMax(req.Endpoint, body, 100)
					nb, _ = InjectIncludeUsage(nb)
				}
				if len(nb) <= len(body) {
					b.Fatal("not rewritten")
				}
			}
		})
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + "MB"
	}
	return strconv.Itoa(n>>10) + "KB"
}
