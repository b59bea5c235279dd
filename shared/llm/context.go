package llm

import "strings"

// MaxContextBound is the most tokens one call is taken to be able to
// consume or produce on a model this package does not know: 2^24
// (16,777,216), above the largest context window any model offers.
const MaxContextBound = 1 << 24

// contextBounds are the model families whose context windows are known,
// longest prefix first, each at twice the largest window the family
// offers (a 1M beta included), so a family whose window grows under the
// same name is not clamped before it doubles.
var contextBounds = []struct {
	prefix string
	tokens int64
}{
	{"gpt-4.1", 2 * 1_047_576},
	{"gpt-4o", 2 * 128_000},
	{"gpt-4-turbo", 2 * 128_000},
	{"gpt-5", 2 * 400_000},
	{"o1", 2 * 200_000},
	{"o3", 2 * 200_000},
	{"o4", 2 * 200_000},
	{"claude-", 2 * 1_000_000},
	{"gemini-", 2 * 2_097_152},
	// An embeddings call takes at most 300,000 tokens over all its inputs.
	{"text-embedding-", 2 * 300_000},
}

// ContextBound is the most tokens one call to model can take in, and the
// most one choice can give out: twice the largest context window of the
// model's family, or MaxContextBound for a model of no family listed. The
// name is matched as pricing matches it: case and a "provider/" prefix
// ignored.
func ContextBound(model string) int64 {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	for _, b := range contextBounds {
		if strings.HasPrefix(m, b.prefix) {
			return b.tokens
		}
	}
	return MaxContextBound
}

// UsageBound is the most usage a request could have produced: input at
// most the model's ContextBound (or the request's own PromptBytes, if
// larger: the bound never falls below what the body itself carries),
// output at most its output maximum times the completions it asked for
// (MaxTokens × Choices), or ContextBound per choice when it set no
// maximum; an embeddings call produces no output.
func UsageBound(req Request, model string) (input, output int64) {
	ctx := ContextBound(model)
	input = max(ctx, req.PromptBytes)
	choices := max(req.Choices, 1)
	switch {
	case req.Endpoint == Embeddings:
		output = 0
	case req.HasMaxTokens && req.MaxTokens >= 0:
		output = mulSat(req.MaxTokens, choices)
	default:
		output = mulSat(ctx, choices)
	}
	return input, output
}

// mulSat multiplies two non-negative numbers, saturating.
func mulSat(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > (1<<63-1)/b {
		return 1<<63 - 1
	}
	return a * b
}
