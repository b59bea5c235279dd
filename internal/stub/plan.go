package stub

import "github.com/tokentriage/tokentriage/shared/llm"

// replyPattern is the reply text, repeated: 76 bytes, 19 tokens of 4.
const replyPattern = "This stub upstream replies with deterministic text at four bytes per token. "

// TokenBytes is the number of reply bytes per completion token.
const TokenBytes = 4

// Reply is the deterministic reply text of n completion tokens (4n bytes).
func Reply(n int64) string {
	if n <= 0 {
		return ""
	}
	b := make([]byte, 0, n*TokenBytes)
	for int64(len(b)) < n*TokenBytes {
		b = append(b, replyPattern[:min(int64(len(replyPattern)), n*TokenBytes-int64(len(b)))]...)
	}
	return string(b)
}

// PromptTokens is the prompt token count the stub reports for a request:
// ceil(PromptBytes/4), at least 1.
func PromptTokens(req llm.Request) int64 {
	return max(1, llm.EstimateTokens(req.PromptBytes))
}

// CompletionTokens is the completion token count the stub reports:
// override when it is not negative, else DefaultCompletionTokens or the
// request's maximum when smaller; 0 for embeddings.
func CompletionTokens(req llm.Request, override int64) int64 {
	switch {
	case req.Endpoint == llm.Embeddings:
		return 0
	case override >= 0:
		return override
	case req.HasMaxTokens && req.MaxTokens < DefaultCompletionTokens:
		return req.MaxTokens
	}
	return DefaultCompletionTokens
}

// plan is everything one answer is built from.
type plan struct {
	req        llm.Request
	id         string
	prompt     int64
	completion int64
	cached     int64
	deltas     int64 // deltas asked for (HeaderPieces), 0 for the default
	truncated  bool  // the output maximum cut the reply short
	text       string
}

func newPlan(req llm.Request, body []byte, c controls) plan {
	p := plan{req: req, id: requestID(body), prompt: PromptTokens(req)}
	p.completion = CompletionTokens(req, c.completion)
	p.truncated = c.completion < 0 && req.HasMaxTokens && req.MaxTokens < DefaultCompletionTokens
	p.cached = min(c.cached, p.prompt)
	p.deltas = c.pieces
	p.text = Reply(p.completion)
	return p
}

// pieces splits the reply into stream deltas: one token each up to 64
// tokens, then 64 deltas of equal whole tokens (the last shorter); with
// HeaderPieces, at most that many deltas of equal whole tokens.
func (p plan) pieces() []string {
	if p.completion <= 0 {
		return nil
	}
	n := int64(64)
	if p.deltas > 0 {
		n = p.deltas
	}
	per := max(1, (p.completion+n-1)/n) * TokenBytes
	out := make([]string, 0, min(n, p.completion))
	for i := int64(0); i < int64(len(p.text)); i += per {
		out = append(out, p.text[i:min(i+per, int64(len(p.text)))])
	}
	return out
}
