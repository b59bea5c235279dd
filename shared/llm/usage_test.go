package llm

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// TestParseUsageGolden runs every testdata/usage/*.json through ParseUsage.
func TestParseUsageGolden(t *testing.T) {
	for _, file := range inputs(t, "usage", ".json") {
		body, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		path := pathFor(t, file)
		u, model, ok := ParseUsage(path, body)
		var out strings.Builder
		fmt.Fprintf(&out, "POST %s\nok: %v\n", path, ok)
		if ok {
			js, _ := json.Marshal(u)
			fmt.Fprintf(&out, "usage: %s\nmodel_served: %s\n", js, model)
		}
		checkGolden(t, goldenName(file), []byte(out.String()))
	}
}

func TestParseUsageMapping(t *testing.T) {
	for i, tc := range []struct {
		path, body string
		want       ledger.Usage
		model      string
		ok         bool
	}{
		{"/v1/chat/completions", `{"model":"m","usage":{"prompt_tokens":10,"completion_tokens":5}}`,
			ledger.Usage{Input: 10, Output: 5, Total: 15}, "m", true},
		{"/v1/embeddings", `{"usage":{"prompt_tokens":8,"total_tokens":8}}`,
			ledger.Usage{Input: 8, Total: 8}, "", true},
		{"/v1/messages", `{"model":"c","usage":{"input_tokens":3,"cache_read_input_tokens":100,"cache_creation_input_tokens":20,"output_tokens":7}}`,
			ledger.Usage{Input: 123, Output: 7, CachedInput: 100, Total: 130}, "c", true},
		{"/v1/responses", `{"usage":{"input_tokens":30,"input_tokens_details":{"cached_tokens":10},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":4},"total_tokens":39}}`,
			ledger.Usage{Input: 30, Output: 9, CachedInput: 10, Reasoning: 4, Total: 39}, "", true},
		{"/v1/chat/completions", `{"usage":{}}`, ledger.Usage{}, "", false},
		{"/v1/chat/completions", `{"usage":{"prompt_tokens":1,}}`, ledger.Usage{}, "", false},
		{"/v1/chat/completions", `[1,2]`, ledger.Usage{}, "", false},
		{"/v1/chat/completions", ``, ledger.Usage{}, "", false},
		{"/v1/models", `{"usage":{"prompt_tokens":1}}`, ledger.Usage{}, "", false},
		{"/v1/chat/completions", `{"usage":{"prompt_tokens":1e300,"completion_tokens":1e300}}`,
			ledger.Usage{Input: maxExactInt, Output: maxExactInt, Total: 2 * maxExactInt}, "", true},
	} {
		u, model, ok := ParseUsage(tc.path, []byte(tc.body))
		if u != tc.want || model != tc.model || ok != tc.ok {
			t.Errorf("case %d: ParseUsage(%s, %s) = %+v, %q, %v; want %+v, %q, %v", i, tc.path, tc.body, u, model, ok, tc.want, tc.model, tc.ok)
		}
	}
}
