package filter

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// TestAnswerPastTheCopyCapIsChargedItsUsage: a non-streamed answer larger
// than the filter's copy of JSON answers (8 MiB) is settled on the usage
// the provider reported after its text, read as the answer passes; one
// whose usage cannot be read (cut short) is charged the most the call
// could produce, marked estimated. Neither is settled with 0 output
// tokens.
func TestAnswerPastTheCopyCapIsChargedItsUsage(t *testing.T) {
	key, e := tpmEngine(t)
	const chat = `{"model":"gpt-4o","max_tokens":20000,"messages":[{"role":"user","content":"write a great deal"}]}`

	var text bytes.Buffer
	text.WriteString(`{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"`)
	line := strings.Repeat(`many words, some \"quoted\", some {braced} `, 100)
	for text.Len() < 9<<20 {
		text.WriteString(line)
	}
	text.WriteString(`"},"finish_reason":"stop"}]`)
	whole := text.String() + `,"usage":{"prompt_tokens":5,"completion_tokens":16000,"total_tokens":16005}}`
	cut := text.String() // the connection ended before the usage

	for i, c := range []struct {
		answer string
		want   ledger.Usage
		est    ledger.Estimated
		served string
	}{
		{whole, ledger.Usage{Input: 5, Output: 16000, Total: 16005}, ledger.Estimated{}, "gpt-4o-2024-08-06"},
		{cut, ledger.Usage{Input: 5, Output: 16384, Total: 16389}, ledger.Estimated{Input: true, Output: true}, ""},
	} {
		s := e.NewStream()
		v := e.RequestHeaders(s, &RequestHead{Method: "POST", Path: "/v1/chat/completions", Authorization: "Bearer " + key, Authority: "gw.example"})
		if v.Action == ActContinue {
			v = e.RequestBody(s, len(chat), true, bytesBody(chat))
		}
		if v.Action != ActContinue {
			t.Fatalf("step %d: refused: %s", i, v.Reply.Body)
		}
		e.ResponseHeaders(s, 200, "application/json", "")
		for off := 0; off < len(c.answer); off += 64 << 10 {
			end := min(off+64<<10, len(c.answer))
			e.ResponseBody(s, []byte(c.answer[off:end]), end == len(c.answer))
		}
		if cap(s.jsonBody) != 0 {
			t.Errorf("step %d: the stream still holds a %d-byte copy of the answer", i, cap(s.jsonBody))
		}
		r := settleRow(t, e, s)
		if r.Usage != c.want || r.Estimated != c.est || r.Served != c.served {
			t.Errorf("step %d: usage %+v estimated %+v served %q\nwant  %+v estimated %+v served %q", i, r.Usage, r.Estimated, r.Served, c.want, c.est, c.served)
		}
	}
}
