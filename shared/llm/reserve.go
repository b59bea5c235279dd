package llm

// ReserveCap is the most output a tpm reserve counts for one request: the
// output half of the reserve is min(max_tokens, ReserveCap), and the whole
// of ReserveCap when the caller set no maximum (seed 000).
const ReserveCap = 16384

// Reserve is the tpm reserve of a request: PromptBytes/4 +
// min(MaxTokens, ReserveCap), or PromptBytes/4 + ReserveCap without a
// maximum. 'What is the capital of Germany?' (31 bytes) with no max_tokens
// reserves 7 + 16384 = 16391. An embeddings request produces no output, so
// its reserve is PromptBytes/4 alone.
func Reserve(req Request) int64 {
	out := OutputReserve(req)
	in := req.PromptBytes / 4
	if in < 0 {
		in = 0
	}
	return addSat(in, out)
}

// EstimateTokens is the token estimate of n bytes of text, rounded up:
// ceil(n/4). It is what the stub upstream reports for a prompt and what a
// stream with no reported usage is charged for its text.
func EstimateTokens(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return n/4 + (n%4+3)/4
}

// OutputReserve is the output share of the reserve: min(MaxTokens,
// ReserveCap), ReserveCap without a maximum, 0 for embeddings.
func OutputReserve(req Request) int64 {
	out := int64(ReserveCap)
	if req.Endpoint == Embeddings {
		out = 0
	} else if req.HasMaxTokens && req.MaxTokens >= 0 && req.MaxTokens < out {
		out = req.MaxTokens
	}
	return out
}
