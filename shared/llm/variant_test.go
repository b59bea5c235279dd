package llm

import (
	"strings"
	"testing"
)

func TestVariantOf(t *testing.T) {
	for _, c := range []struct {
		path string
		want Endpoint
	}{
		{"/v1/chat%2Fcompletions", ChatCompletions},
		{"/v1/chat%2fcompletions", ChatCompletions},
		{"/v1/chat%252Fcompletions", ChatCompletions},
		{"/V1/CHAT/COMPLETIONS", ChatCompletions},
		{"/v1/Chat/Completions?stream=true", ChatCompletions},
		{"/v1/chat/completions;x", ChatCompletions},
		{"/v1;a=b/chat/completions", ChatCompletions},
		{"/v1/chat/completions%2F", ChatCompletions},
		{"/v1/chat/completions%2f%2e", ChatCompletions},
		{"/v1/chat/complet%69ons", ChatCompletions},
		{"/v1\\chat\\completions", ChatCompletions},
		{"/v1/chat/completions%00.json", ChatCompletions},
		{"/v1/chat/completions%3Fx=1", ChatCompletions},
		{"/v1/chat/completions%20", ChatCompletions},
		{"/openai%2Fv1/chat/completions", ChatCompletions},
		{"/v1/MESSAGES", Messages},
		{"/v1/embeddings%2F", Embeddings},
		{"/v1/Responses", Responses},
		{"/v1/Completions", Completions},
		// Not variants: what EndpointOf classifies, and paths no server
		// reads as a governed endpoint.
		{"/v1/chat/completions", Unknown},
		{"/v1/chat/completions/", Unknown},
		{"//v1/./chat/completions", Unknown},
		{"/v1/models", Unknown},
		{"/v1/Models", Unknown},
		{"/v1/files/file-ABC%2F", Unknown},
		{"/v1/messages/count_tokens", Unknown},
		{"/v1/messages%2Fcount_tokens", Unknown},
		{"/v1/chat/completions%", Unknown},
		{"/v1/chat%2completions", Unknown},
	} {
		if got := VariantOf(c.path); got != c.want {
			t.Errorf("VariantOf(%q) = %v, want %v", c.path, got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { VariantOf("/v1/models") }); n != 0 {
		t.Errorf("VariantOf of a plain path allocates %v times", n)
	}
}

func FuzzVariantOf(f *testing.F) {
	f.Add("/v1/chat%2Fcompletions")
	f.Add("/V1/MESSAGES;x?y")
	f.Fuzz(func(t *testing.T, p string) {
		ep := VariantOf(p)
		if ep != Unknown && EndpointOf(strings.SplitN(p, "?", 2)[0]) == ep && !strings.ContainsAny(p, "%;\\#") {
			// A variant is never what EndpointOf reads already (a path
			// that Clean turns into the endpoint is not odd).
			if !oddPath(p) {
				t.Fatalf("VariantOf(%q) = %v for a plain path", p, ep)
			}
		}
	})
}
