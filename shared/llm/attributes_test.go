package llm

import (
	"testing"

	"github.com/tokentriage/tokentriage/shared/jsontok/jv"
)

func TestFields(t *testing.T) {
	body := []byte(`{"model":"gpt-4o","user":"u1","metadata":{"user_id":"m1","tags":["a","b"]},"n":2,"user":"u2"}`)
	got := Fields(body, []string{"user", "safety_identifier", "metadata.user_id", "metadata.tags", "metadata.none", "n"}, nil)
	want := []struct {
		typ jv.Type
		raw string
	}{{jv.String, `"u1"`}, {jv.Null, ""}, {jv.String, `"m1"`}, {jv.JSON, `["a","b"]`}, {jv.Null, ""}, {jv.Number, "2"}}
	if len(got) != len(want) {
		t.Fatalf("%d results", len(got))
	}
	for i, w := range want {
		if got[i].Type != w.typ || got[i].Raw != w.raw {
			t.Errorf("field %d: %v %q, want %v %q", i, got[i].Type, got[i].Raw, w.typ, w.raw)
		}
	}
	if got := Fields(body, nil, nil); len(got) != 0 {
		t.Errorf("no paths: %v", got)
	}
	// A member named like a path with a dot is not a nested member.
	if got := Fields([]byte(`{"metadata.user_id":"x"}`), []string{"metadata.user_id"}, nil); got[0].Raw != "" {
		t.Errorf("dotted member read as nested: %v", got[0])
	}
}
