package stub

import (
	"unicode/utf8"

	"github.com/tokentriage/tokentriage/shared/llm"
)

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
	// text is the reply: the deterministic text, the JSON of a structured
	// output, or a tool call's arguments (shape says which).
	text  string
	shape shape
}

func newPlan(req llm.Request, body []byte, c controls) plan {
	p := plan{req: req, id: requestID(body), prompt: PromptTokens(req)}
	p.cached = min(c.cached, p.prompt)
	p.deltas = c.pieces
	if req.Endpoint != llm.Embeddings && req.Endpoint != llm.Completions {
		p.shape = shapeOf(req.Endpoint, body)
	}
	if p.shape.kind == answerText {
		p.completion = CompletionTokens(req, c.completion)
		p.truncated = c.completion < 0 && req.HasMaxTokens && req.MaxTokens < DefaultCompletionTokens
		p.text = Reply(p.completion)
		return p
	}
	// JSON or a tool call: its length sets the count, 4 bytes a token,
	// and an output maximum below it cuts it short, as a model would.
	p.text = string(p.shape.json)
	p.completion = max(1, (int64(len(p.text))+TokenBytes-1)/TokenBytes)
	if req.HasMaxTokens && req.MaxTokens < p.completion {
		p.completion, p.truncated = req.MaxTokens, true
		p.text = p.text[:min(int64(len(p.text)), max(0, req.MaxTokens)*TokenBytes)]
	}
	if c.completion >= 0 {
		p.completion = c.completion
	}
	return p
}

// tool reports whether the plan calls a tool.
func (p plan) tool() bool { return p.shape.kind == answerTool }

// callID is the id of the plan's tool call, prefixed as each provider
// prefixes its own (call_, toolu_, fc_).
func (p plan) callID(prefix string) string { return prefix + "stub" + p.id }

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
	tokens := max(p.completion, (int64(len(p.text))+TokenBytes-1)/TokenBytes)
	per := max(1, (tokens+n-1)/n) * TokenBytes
	out := make([]string, 0, min(n, tokens))
	for i := int64(0); i < int64(len(p.text)); {
		j := min(i+per, int64(len(p.text)))
		for j < int64(len(p.text)) && !utf8.RuneStart(p.text[j]) {
			j++ // never split a character
		}
		out = append(out, p.text[i:j])
		i = j
	}
	return out
}
