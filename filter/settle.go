package filter

import (
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/llm"
)

// maxSettleTokens bounds what one request's usage can charge a tpm window:
// 16,777,216 tokens, several times the largest context any model offers.
const maxSettleTokens = 1 << 24

// Done settles a request on every terminal path (served, upstream error,
// client reset, local reply), exactly once: leases are released, tpm
// reserves are reconciled against the usage, and one ledger row is queued
// for the accountant.
func (e *Engine) Done(s *Stream) {
	if s.settled {
		return
	}
	s.settled = true
	now := e.host.Now()
	e.releaseLeases(s, now)
	if s.id == "" || s.local || (!s.governs && !s.passthrough && s.refusal.errorType == "") {
		return // /tt/v1/me, governance off
	}
	if s.passthrough && s.refusal.errorType == "" {
		// Forwarded ungoverned: a row all the same, so every request that
		// reached the upstream is in the ledger.
		if !s.replied {
			e.host.Metrics.Add(MetricPassthrough, 1)
			e.queueRow(s, now)
		}
		return
	}
	if s.governs && !s.forwarded && s.refusal.errorType == "" {
		// The client went away before its body was complete: nothing
		// reached the provider, and a row would count as a forwarded
		// request. The rpm arrival stays counted, as for any refusal.
		return
	}
	if s.refusal.errorType == "" && !s.replied {
		e.settleUsage(s)
		e.boundUsage(s)
		actual := s.usage.Total
		if actual == 0 {
			actual = s.usage.Input + s.usage.Output
		}
		if actual > maxSettleTokens || actual < 0 {
			// A usage report no model can produce (a broken or hostile
			// upstream) would lock the window for years: the row keeps what
			// was reported, the window is charged the ceiling.
			e.logf(LogWarn, "request %s: the provider reported %d tokens; tpm is charged %d", s.id, actual, int64(maxSettleTokens))
			actual = maxSettleTokens
		}
		for _, r := range s.reserves {
			actual := settledTokens(r.metric, min(max(s.usage.Input, 0), maxSettleTokens), min(max(s.usage.Output, 0), maxSettleTokens), actual) // what this reserve's metric counts
			if r.lot != 0 {
				// In the lot it came from while that is the replica's;
				// what it cannot take is committed in the fleet's Redis by
				// the accountant when it records this row (exactly once,
				// by request id).
				if rest := e.settleLeased(r, actual-r.amount, now); rest != 0 {
					s.reconcile = append(s.reconcile, reconcileEntry(r, rest))
				}
				continue
			}
			if r.cell == "" {
				continue
			}
			if err := e.cells.rateAdjust(r.cell, r.alg, now, actual-r.amount, r.params); err != nil {
				e.logf(LogWarn, "reconciling a tpm reserve on %s: %v", r.cell, err)
			}
		}
		s.reserves = s.reserves[:0]
		e.host.Metrics.Add(MetricAdmitted, 1)
	}
	e.settleSpend(s, s.forwarded && s.refusal.errorType == "" && !s.replied, now)
	e.queueRow(s, now)
}

// queueRow queues the request's ledger row for the accountant (ledgerq.go),
// and sends the queue when it is due (sendRowsNow), so a crash loses as
// few rows as it can.
func (e *Engine) queueRow(s *Stream, now time.Time) {
	if e.host.Caller == nil {
		return // no accountant: nothing folds rows
	}
	e.fillRow(&e.row, s, now)
	if e.unauthSummed(s, &e.row, now) {
		return
	}
	e.enqueue(&e.row, now)
	e.sendRowsNow(now)
}

// settleUsage works out the request's usage: as the provider reported it,
// or estimated (and flagged) from the prompt and the streamed text.
func (e *Engine) settleUsage(s *Stream) {
	switch {
	case s.sse != nil:
		s.usage, s.estimated = s.sse.Usage()
		s.served = s.sse.Model()
	case s.parsed && s.jsonOver && s.status < 300:
		if u, served, ok := s.bigJSON.Usage(s.path); ok {
			s.usage, s.served = u, served
			return
		}
		// An answer past the copy cap whose usage could not be read (cut
		// short, or not JSON): it is large, so its output is not 0; it
		// is charged the most the call could produce (the tpm reserve's
		// output share), marked estimated.
		in := llm.EstimateTokens(s.req.PromptBytes)
		s.usage = ledger.Usage{Input: in, Output: llm.OutputReserve(s.req) * max(s.req.Choices, 1)}
		s.usage.Total = s.usage.Input + s.usage.Output
		s.estimated = ledger.Estimated{Input: true, Output: true}
	case s.parsed && !s.jsonOver && len(s.jsonBody) > 0 && s.status < 300:
		if u, served, ok := llm.ParseUsage(s.path, s.jsonBody); ok {
			s.usage, s.served = u, served
			return
		}
		fallthrough
	case s.parsed && s.status < 300 && s.respSeen:
		// A served answer without readable usage: the prompt is known, the
		// output is not.
		s.usage = ledger.Usage{Input: llm.EstimateTokens(s.req.PromptBytes)}
		s.usage.Total = s.usage.Input
		s.estimated = ledger.Estimated{Input: true, Output: true}
	case s.parsed && !s.respSeen:
		// The client went away before the provider answered. The provider
		// may well finish and bill the call: a non-streamed completion is
		// generated whole whether or not anyone reads it, so it is charged
		// the most output it could produce (the tpm reserve's output
		// share: max_tokens, at most 16,384); a stream stops with its
		// reader, and is charged its prompt.
		in := llm.EstimateTokens(s.req.PromptBytes)
		s.usage = ledger.Usage{Input: in}
		if !s.req.Stream && s.forwarded {
			s.usage.Output = llm.OutputReserve(s.req) * max(s.req.Choices, 1)
		}
		s.usage.Total = s.usage.Input + s.usage.Output
		s.estimated = ledger.Estimated{Input: true, Output: true}
	}
}

// boundUsage holds the usage to what the request could have produced
// (llm.UsageBound: the model's context bound for the input, the output
// maximum times the completions asked for): a provider's report past it (a
// broken or hostile upstream, 1e12 prompt tokens) would bill the tenant
// for tokens no call can consume, and lock its budget until the ledger is
// edited. A clamped figure is marked estimated, the row is flagged, the
// metric counts it and the log names the upstream. Cached and reasoning
// counts are held to the input and output they are part of.
func (e *Engine) boundUsage(s *Stream) {
	if !s.parsed {
		return
	}
	in, out := llm.UsageBound(s.req, s.req.Model)
	if s.served != "" && s.served != s.req.Model && llm.ContextBound(s.served) != llm.MaxContextBound {
		// A route may answer with another model, of a larger context; the
		// upstream's word for a model of no known family widens nothing.
		si, so := llm.UsageBound(s.req, s.served)
		in, out = max(in, si), max(out, so)
	}
	u := s.usage
	clamped := false
	if u.Input > in {
		u.Input, s.estimated.Input, clamped = in, true, true
	}
	if u.Output > out {
		u.Output, s.estimated.Output, clamped = out, true, true
	}
	if u.Total > u.Input+u.Output+u.Reasoning || u.Total > in+out {
		// Some providers count reasoning beside the output in the
		// total; anything past that, or past the bound, is not a total.
		u.Total, clamped = u.Input+u.Output, true
	}
	// A total under input + output would under-charge tpm; it is not
	// past any bound, so it is mended without a flag.
	u.Total = max(u.Total, u.Input+u.Output)
	u.CachedInput = min(u.CachedInput, u.Input)
	u.Reasoning = min(u.Reasoning, u.Output)
	if !clamped {
		s.usage = u
		return
	}
	s.clamped = true
	e.host.Metrics.Add(MetricUsageClamped, 1)
	upstream := ""
	if e.host.Upstream != nil {
		upstream = e.host.Upstream()
	}
	if upstream == "" {
		upstream = "(unknown address)"
	}
	e.logf(LogWarn, "request %s: the upstream %s (provider %q, authority %q, model %q) reported %d input, %d output and %d total tokens, more than the request could produce (at most %d input and %d output); the row carries %d and %d, marked estimated and usage_clamped",
		s.id, upstream, s.dims.Provider, s.authority, firstNonEmpty(s.served, s.req.Model), s.usage.Input, s.usage.Output, s.usage.Total, in, out, u.Input, u.Output)
	s.usage = u
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// fillRow writes the ledger row of a finished request into r (the
// engine's one row, encoded at once).
func (e *Engine) fillRow(r *ledger.Row, s *Stream, now time.Time) {
	*r = ledger.Row{
		RequestID:    s.id,
		Start:        s.start.UTC(),
		End:          now.UTC(),
		KID:          s.kid,
		Node:         s.owner,
		Endpoint:     s.endpoint(),
		Provider:     s.dims.Provider,
		Model:        s.askedModel(),
		Served:       s.served,
		Stream:       s.req.Stream,
		Usage:        s.usage,
		Status:       s.status,
		Estimated:    s.estimated,
		Replica:      e.replica,
		UsageClamped: s.clamped,
		Free:         s.passthrough && s.free != freeNone,
		Shadow:       s.shadow,
		Breached:     s.breached,
		Suspended:    s.suspended,
		Reconcile:    s.reconcile,
		Customer:     s.dims.Customer,
		Tags:         rowTags(s.dims.Tags),
		Overflow:     s.overflow,
		Fallback:     s.fallbackRef(),
	}
	if s.unarmed {
		r.Suspended = append(r.Suspended, "*")
	}
	// A key's model scope is checked on the model the request names, and
	// re-asserted here on the model that answered.
	if sc := s.scopes; sc != nil && sc.Models != nil && s.served != "" && s.served != s.req.Model && !modelAllowed(sc.Models, s.served) {
		r.ServedOutOfScope = true
		e.host.Metrics.Add(MetricServedOutOfScope, 1)
		e.logf(LogWarn, "request %s: key %s asked for %q, in its model scope, and was answered by %q, outside it", s.id, s.kid, s.req.Model, s.served)
	}
	switch {
	case s.refusal.errorType != "":
		r.Decision = ledger.Refused
		r.ErrorType = s.refusal.errorType
		r.RefusedBy = s.refusal.by
	case s.passthrough:
		r.Decision = ledger.Passthrough
	default:
		r.Decision = forwardedAs(s)
	}
}

// forwardedAs is the decision of a request the gates let through.
func forwardedAs(s *Stream) ledger.Decision {
	switch {
	case len(s.breached) > 0:
		return ledger.SoftBreach
	case len(s.shadow) > 0:
		return ledger.ShadowRefused
	}
	return ledger.Admitted
}
