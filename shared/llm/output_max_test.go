package llm

import "testing"

func TestSetOutputMax(t *testing.T) {
	for _, c := range []struct {
		ep         Endpoint
		in, want   string
		changed    bool
		wantMax    int64
		hasMaxWant bool
	}{
		{ChatCompletions, `{"model":"gpt-4o","messages":[]}`, `{"model":"gpt-4o","messages":[],"max_completion_tokens":42}`, true, 42, true},
		{ChatCompletions, `{"model":"gpt-4o","max_tokens":500,"messages":[]}`, `{"model":"gpt-4o","max_tokens":42,"messages":[]}`, true, 42, true},
		{ChatCompletions, `{"max_completion_tokens": 900, "model":"o1","max_tokens":100}`, `{"max_completion_tokens": 42, "model":"o1","max_tokens":42}`, true, 42, true},
		{ChatCompletions, `{"model":"gpt-4o","max_tokens":null}`, `{"model":"gpt-4o","max_tokens":null,"max_completion_tokens":42}`, true, 42, true},
		{Completions, `{"model":"x","prompt":"hi"}` + "\n", `{"model":"x","prompt":"hi","max_tokens":42}` + "\n", true, 42, true},
		{Responses, `{"model":"x","input":"hi","max_output_tokens":4096}`, `{"model":"x","input":"hi","max_output_tokens":42}`, true, 42, true},
		{Messages, `{"model":"claude","max_tokens":1024,"messages":[]}`, `{"model":"claude","max_tokens":42,"messages":[]}`, true, 42, true},
		{Embeddings, `{"model":"e","input":"x"}`, `{"model":"e","input":"x"}`, false, 0, false},
		{ChatCompletions, `{"model":`, `{"model":`, false, 0, false},
	} {
		got, changed := SetOutputMax(c.ep, []byte(c.in), 42)
		if string(got) != c.want || changed != c.changed {
			t.Errorf("%v %s: got %s %v, want %s %v", c.ep, c.in, got, changed, c.want, c.changed)
			continue
		}
		if !changed {
			continue
		}
		path := c.ep.String()
		req, err := ParseRequest(path, got)
		if err != nil || req.MaxTokens != c.wantMax || req.HasMaxTokens != c.hasMaxWant {
			t.Errorf("%v %s: reparsed %+v, %v", c.ep, got, req, err)
		}
	}
}
