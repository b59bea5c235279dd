package filter

import (
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// A limit with a fallback (fallback: { model: ... }, on budget_usd and the
// quotas) serves with the fallback model a request it would refuse: at
// gate 2 its refusal is held (not answered, not counted), what the walk
// took at gate 2 is handed back, the body's model is rewritten, and the
// gate-2 limits are resolved and walked again for the new model, the
// key's model scope first. Served, the response says X-Tt-Fallback:
// <limit_id>;model=<model> and the row carries the limit and the model
// (ledger.Row.Fallback; the accountant prices and counts the model sent).
// Refused again, by any limit, or not possible (the key's scope refuses
// the model, or the body names no model member), the original refusal is
// answered as if no fallback existed. A request falls back once. The walk
// for the fallback model may wait for a lease like any (leaseask.go): it
// resumes still trying the fallback.

// fallbackState is a request's fallback: the held refusal while it is
// tried, and what it was served with.
type fallbackState struct {
	// held: refuse held a refusal of a limit with a fallback (refusal, in)
	// for the walk to try it.
	held    bool
	refusal wire.Refusal
	in      govern.Instance
	// trying: the walk for the fallback model runs; its refusals are
	// answered by the held one.
	trying bool
	// tried: the request fell back (or tried to); it does not again.
	tried bool
	// limitID and model: the request was served with that limit's
	// fallback model; asked is the model the caller named.
	limitID, model, asked string
	// marks are the lengths, when gate 2 began, of what the walk appends
	// to (leases, overflow, shadow, breached), so a fallback drops what
	// the first model's walk added.
	leases, overflow, shadow, breached int
}

// served reports whether the request was served with a fallback model.
func (f *fallbackState) served() bool { return f.model != "" }

// mark notes, as gate 2 begins, what the walk will append to.
func (f *fallbackState) mark(s *Stream) {
	f.leases, f.overflow, f.shadow, f.breached = len(s.leases), len(s.overflow), len(s.shadow), len(s.breached)
}

// holdFallback reports whether refuse should hold the refusal r of in for
// its fallback instead of answering it: a spend or quota limit with a
// fallback, at gate 2, on a request that has not fallen back.
func (e *Engine) holdFallback(s *Stream, r *wire.Refusal, in *govern.Instance) bool {
	f := &s.fb
	if in.Limit.Fallback == "" || f.tried || f.held || !s.parsed || s.forwarded || in.Limit.Type.Class() != govern.LedgerSettled {
		return false
	}
	f.held, f.refusal, f.in = true, *r, *in
	return true
}

// fallBack tries the held refusal's fallback model: hands back what the
// walk took at gate 2, rewrites the body, and walks the gate-2 limits of
// the new model; the held refusal is answered when it cannot.
func (e *Engine) fallBack(s *Stream, body []byte, now time.Time, v Verdict) Verdict {
	f := &s.fb
	f.held, f.tried = false, true
	e.handBackGate2(s, now)
	model := f.in.Limit.Fallback
	if sc := s.scopes; sc != nil && sc.Models != nil && !modelAllowed(sc.Models, model) {
		return e.answerHeld(s, v, now)
	}
	asked := s.req.Model
	nb, ok := s.req.SetModel(body, model)
	if !ok {
		return e.answerHeld(s, v, now)
	}
	s.dims.Model = model
	// The facts of this request's chain: gate 2 may have taken its
	// instances from the key's entry (resolveGate) without reading them,
	// and another request's walk may have read others since.
	e.facts = e.chainFacts(s.chain, e.facts)
	e.fbInst = e.armed.ResolveFacts(s.chain, e.facts, s.dims, govern.Gate2, e.fbInst[:0])
	insts := e.fbInst
	e.bindValues(s, insts, now)
	f.trying, f.asked, f.limitID, f.model = true, asked, f.in.Limit.ID, model
	// The walk starts over (a wait of the first model's walk is done
	// with; its deadline still runs).
	since := s.wait.since
	s.wait.reset()
	s.wait.since = since
	return e.gate2Walk(s, insts, nb, now, v)
}

// refusedFallback answers the held refusal after the walk for the
// fallback model refused: what that walk took is handed back and the
// request is the one the caller sent again.
func (e *Engine) refusedFallback(s *Stream, now time.Time, v Verdict) Verdict {
	f := &s.fb
	s.req.Model, s.dims.Model = f.asked, f.asked
	f.trying, f.limitID, f.model, f.asked = false, "", "", ""
	s.replacedBody = false
	return e.answerHeld(s, v, now)
}

// handBackGate2 gives back what the gate-2 walk took (tpm reserves,
// budget reservations and holds, its concurrency leases, gate 1's kept)
// and drops what it noted on the row.
func (e *Engine) handBackGate2(s *Stream, now time.Time) {
	f := &s.fb
	e.returnReserves(s, now)
	e.settleSpend(s, false, now)
	e.releaseLeasesFrom(s, f.leases, now)
	s.leases = s.leases[:f.leases]
	s.overflow, s.shadow, s.breached = s.overflow[:f.overflow], s.shadow[:f.shadow], s.breached[:f.breached]
	s.outMax = -1
}

// answerHeld answers the held refusal as refuse would have, everything
// the request holds handed back.
func (e *Engine) answerHeld(s *Stream, v Verdict, now time.Time) Verdict {
	f := &s.fb
	e.handBack(s, now)
	r, in := f.refusal, f.in
	return *e.answerRefusal(s, v, &r, &in)
}

// fallbackRef is the row's record of a fallback, nil when none.
func (s *Stream) fallbackRef() *ledger.Fallback {
	if !s.fb.served() {
		return nil
	}
	return &ledger.Fallback{LimitID: s.fb.limitID, Model: s.fb.model}
}

// askedModel is the model the caller named.
func (s *Stream) askedModel() string {
	if s.fb.served() {
		return s.fb.asked
	}
	return s.req.Model
}
