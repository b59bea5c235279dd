package llm

import (
	"strings"
	"testing"
)

// TestSetModel: the model member is replaced and the rest kept; a later
// SetOutputMax on the rewritten body still lands on the right member.
func TestSetModel(t *testing.T) {
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi \"model\""}],"max_tokens":900}`)
	r, err := ParseRequest("/v1/chat/completions", body)
	if err != nil {
		t.Fatal(err)
	}
	out, ok := r.SetModel(body, "gpt-4o-mini")
	want := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi \"model\""}],"max_tokens":900}`
	if !ok || string(out) != want || r.Model != "gpt-4o-mini" {
		t.Fatalf("SetModel: %v %s (model %q)", ok, out, r.Model)
	}
	out2, ok := r.SetOutputMax(out, 50)
	if !ok || string(out2) != strings.Replace(want, "900", "50", 1) {
		t.Fatalf("SetOutputMax after SetModel: %s", out2)
	}
	for _, b := range []string{`{"messages":[]}`, `[1]`, `{"model":`} {
		var r Request
		if out, ok := r.SetModel([]byte(b), "x"); ok || string(out) != b {
			t.Errorf("SetModel(%s) = %s, %v; want it unchanged", b, out, ok)
		}
	}
}
