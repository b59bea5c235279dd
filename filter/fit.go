package filter

import (
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/llm"
	"github.com/tokentriage/tokentriage/shared/rate"
)

// Token metrics and fitting (issue: token caps below 16,384; input and
// output tokens apart).
//
// A tpm or quota_tokens limit counts input, output or total tokens
// (metric:). A tpm reserve is what its metric counts of seed 000's
// estimate: the prompt's bytes/4 (input), min(max_tokens, 16384) (output),
// or both (total); settlement reconciles it to the same part of the
// reported usage.
//
// With fit: true, a call the window (tpm) or the period (quota_tokens)
// cannot hold whole is not refused while it can hold the call's prompt and
// min_output tokens of output: the call's output maximum is lowered to what
// is left (the body's max_completion_tokens, max_tokens or
// max_output_tokens, added when the call set none), and the reserve is
// the prompt and that maximum. A call for which less than min_output (or
// its own maximum, when lower) is left is refused: rate_limited, with the
// wait until it fits, when a full window would hold it; otherwise
// quota_cost_unfittable, naming what it needs and what the limit holds.

// tpmReserve is the tokens a tpm reserve of limit l counts for req:
// seed 000's estimate, or its input or output part.
func tpmReserve(l *govern.Limit, req llm.Request) int64 {
	switch l.Metric {
	case govern.MetricInput:
		return inputEstimate(req)
	case govern.MetricOutput:
		return llm.OutputReserve(req)
	}
	return llm.Reserve(req)
}

// inputEstimate is the input half of a tpm reserve: prompt bytes/4.
func inputEstimate(req llm.Request) int64 { return max(req.PromptBytes/4, 0) }

// fitInput is the input a fitted call of limit l is counted for (none
// when the limit counts output only).
func fitInput(l *govern.Limit, req llm.Request) int64 {
	if l.Metric == govern.MetricOutput {
		return 0
	}
	return inputEstimate(req)
}

// settledTokens is what a reserve of metric m is reconciled to: the
// reported usage's part, or its total (actual).
func settledTokens(m govern.Metric, input, output, actual int64) int64 {
	switch m {
	case govern.MetricInput:
		return input
	case govern.MetricOutput:
		return output
	}
	return actual
}

// fitCap is the output maximum a fitted call starts from: what an earlier
// instance lowered it to, else its own (at most the tpm reserve's cap for
// tpm, whose reserve counts at most that).
func (s *Stream) fitCap(tpm bool) int64 {
	out := outputCap(s.req)
	if tpm {
		out = llm.OutputReserve(s.req)
	}
	if s.outMax >= 0 {
		out = min(out, s.outMax)
	}
	return out
}

// lowerOutput lowers the call's output maximum to out.
func (s *Stream) lowerOutput(out int64) {
	if s.outMax < 0 || out < s.outMax {
		s.outMax = out
	}
}

// fitTPM admits a call whose whole reserve the window of a fit tpm
// instance cannot hold, with its output lowered to what the window holds,
// or refuses it (see the top of the file).
func (e *Engine) fitTPM(s *Stream, in *govern.Instance, now time.Time, v Verdict, p rate.Params) *Verdict {
	l := in.Limit
	outCap := s.fitCap(true)
	inTok := fitInput(l, s.req)
	minOut := min(l.MinOutput, outCap)
	peek, _, err := e.cells.ratePeek(in.CellKey(), l.Algorithm, now, p)
	if err != nil {
		return e.uncheckable(s, in, v, "its shared-data cell could not be read: "+err.Error())
	}
	if out := min(outCap, peek.Remaining-inTok); out >= minOut && outCap > 0 {
		res, err := e.cells.rateTake(in.CellKey(), l.Algorithm, now, inTok+out, p)
		if err != nil {
			return e.uncheckable(s, in, v, "its shared-data cell could not be updated: "+err.Error())
		}
		if res.Allowed {
			s.lowerOutput(out)
			return e.tpmJudged(s, in, now, v, rateDecision{res: res}, inTok+out, in.CellKey())
		}
	}
	// Not even its least fits now: the wait until it does, or that it
	// never can.
	need := inTok + minOut
	res, err := e.cells.rateWouldTake(in.CellKey(), l.Algorithm, now, need, p)
	if err != nil {
		return e.uncheckable(s, in, v, "its shared-data cell could not be read: "+err.Error())
	}
	if res.Allowed {
		// Taken by another VM between the reads: wait a moment.
		res.Allowed, res.RetryAfter = false, time.Second
	}
	return e.tpmJudged(s, in, now, v, rateDecision{res: res}, need, in.CellKey())
}

// fitSettled lowers the output of a call to a fit quota_tokens instance
// under its amount to what the period holds, or refuses it
// quota_cost_unfittable when less than min_output is left.
func (e *Engine) fitSettled(s *Stream, in *govern.Instance, now time.Time, v Verdict, observed int64) *Verdict {
	l := in.Limit
	outCap := s.fitCap(false)
	if outCap <= 0 {
		return nil // no output to lower (embeddings)
	}
	inTok := fitInput(l, s.req)
	minOut := min(l.MinOutput, outCap)
	left := in.Amount - observed
	if out := min(outCap, left-inTok); out >= minOut {
		if out < outCap {
			s.lowerOutput(out)
		}
		return nil
	}
	if !e.over(s, in) {
		return nil
	}
	r := e.settledRefusal(s, in, now, observed)
	r.Unfittable, r.Cost = true, inTok+minOut
	return e.refuse(s, v, &r, in)
}
