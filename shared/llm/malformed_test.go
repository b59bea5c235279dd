package llm

import (
	"testing"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// TestMalformedReadUpToFault fixes how an answer or an SSE event that is
// not valid JSON is read (RATIONALE.md, "Why does filter.wasm not link
// gjson or encoding/json?"): what stands whole before the first fault is
// read, nothing after it by its place; a document broken before its usage
// member has its usage read from the last "usage": object that is valid
// (as an event too large to hold is read); a usage object the fault breaks
// is usage not reported readably, estimated, never read as zero.
func TestMalformedReadUpToFault(t *testing.T) {
	const path = "/v1/chat/completions"
	answers := []struct {
		body string
		ok   bool
		want ledger.Usage
	}{
		// usage whole before the fault: read
		{`{"model":"m","usage":{"prompt_tokens":5,"completion_tokens":7},"choices":[{"message":{"content":"hi"}} oops]}`, true, ledger.Usage{Input: 5, Output: 7, Total: 12}},
		// the fault inside usage: not read
		{`{"model":"m","usage":{"prompt_tokens":5 "completion_tokens":7}}`, false, ledger.Usage{}},
		{`{"model":"m","usage":{"prompt_tokens":5,"completion_tokens":`, false, ledger.Usage{}},
		// usage after the fault: the last valid usage object
		{`{"model":"m","choices":[{"message":{"content":"hi"}} oops],"usage":{"prompt_tokens":5,"completion_tokens":7}}`, true, ledger.Usage{Input: 5, Output: 7, Total: 12}},
		{`{"model":"m",,"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":5,"completion_tokens":7}}`, true, ledger.Usage{Input: 5, Output: 7, Total: 12}},
		{`{"model":"m",,"usage":{"prompt_tokens":5,"completion_tokens":7},"usage":{"prompt_tokens":-1}}`, true, ledger.Usage{Input: 5, Output: 7, Total: 12}},
		// after the fault, a usage object broken too: none readable
		{`{"model":"m",,"usage":{"prompt_tokens":5,"completion_tokens":7`, false, ledger.Usage{}},
	}
	for _, a := range answers {
		u, _, ok := ParseUsage(path, []byte(a.body))
		if ok != a.ok || u != a.want {
			t.Errorf("ParseUsage(%s) = %+v %v, want %+v %v", a.body, u, ok, a.want, a.ok)
		}
	}

	events := []struct {
		stream    string
		textBytes int64
		usage     bool
	}{
		// text whole before the fault counts; the usage after it is read
		{"data: {\"choices\":[{\"delta\":{\"content\":\"hello\"}}] oops, \"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7}}\n\n", 5, true},
		// a usage object the fault breaks: estimated
		{"data: {\"choices\":[{\"delta\":{\"content\":\"hello\"}}], \"usage\":{\"prompt_tokens\":5 \"completion_tokens\":7}}\n\n", 5, false},
		// a choice cut by the fault: its text before the fault counts
		{"data: {\"choices\":[{\"delta\":{\"content\":\"hello\",\"refusal\":\"no\" x}}]}\n\n", 7, false},
		// a string the fault cuts counts nothing
		{"data: {\"choices\":[{\"delta\":{\"content\":\"hel\n\n", 0, false},
		// usage whole before the fault is read
		{"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7} oops}\n\n", 0, true},
	}
	for _, e := range events {
		for _, r := range []scanResult{scan(path, false, 40, []byte(e.stream)), scanGJSON(path, false, 40, []byte(e.stream))} {
			if r.textBytes != e.textBytes {
				t.Errorf("%q: %d text bytes, want %d", e.stream, r.textBytes, e.textBytes)
			}
			if e.usage {
				if r.est != (ledger.Estimated{}) || r.usage.Input != 5 || r.usage.Output != 7 {
					t.Errorf("%q: usage %+v estimated %+v, want 5 and 7 as reported", e.stream, r.usage, r.est)
				}
			} else if !r.est.Input || !r.est.Output || r.usage.Input != EstimateTokens(40) || r.usage.Output != EstimateTokens(e.textBytes) {
				t.Errorf("%q: usage %+v estimated %+v, want both estimated", e.stream, r.usage, r.est)
			}
		}
	}
}
