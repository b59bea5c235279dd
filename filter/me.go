package filter

import (
	"time"

	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// answerLocal answers the /tt/ paths the filter serves itself: GET
// /tt/v1/me, and 404/405 for the rest, so nothing under /tt/ reaches a
// provider.
func (e *Engine) answerLocal(s *Stream, key string, foreign bool) Verdict {
	var v Verdict
	if s.path != MePath {
		return e.reject(s, v, wire.NotFound(s.id, s.path))
	}
	if s.method != "GET" {
		return e.reject(s, v, wire.MethodNotAllowed(s.id, s.method, s.path, "GET"))
	}
	if e.armed == nil {
		return e.reject(s, v, wire.Rejection{Status: 503, Type: wire.TypeLimitUnavailable, RequestID: s.id,
			Message: "no governance plan is in force yet: the filter is waiting for its first sync with the accountant; try again in a few seconds"})
	}
	auth, ent, kid := e.keys.authenticate(key)
	switch auth {
	case authUnknown:
		return e.reject(s, v, wire.UnknownKey(s.id, kid))
	case authRevoked:
		return e.reject(s, v, wire.RevokedKey(s.id, kid))
	case authAnonymous, authMalformed:
		if e.plan.Enabled && e.plan.RequireKey {
			return e.reject(s, v, missingKey(s.id, foreign))
		}
		// Traffic without a key is served (require_key off, or governance
		// off): it resolves to the chain [__global], unscoped, and may see
		// its own caps.
		kid, ent = "", nil
	}
	now := e.host.Now()
	var me wire.Me
	if ent != nil {
		s.kid, s.owner = kid, ent.owner
		me = wire.Me{
			KID:  kid,
			Node: ent.owner,
			Scopes: wire.Scopes{
				Models:           ent.scopes.Models,
				Providers:        ent.scopes.Providers,
				Endpoints:        ent.scopes.Endpoints,
				AllowPassthrough: ent.scopes.AllowPassthrough,
			},
		}
	} else {
		me = wire.Me{Node: govern.Global, Scopes: wire.Scopes{AllowPassthrough: true}}
	}
	s.chain = govern.AppendChain(s.chain[:0], s.owner, s.kid)
	me.Chain = s.chain
	if e.plan.Enabled {
		e.inst = e.armed.ResolveAll(s.chain, govern.Dims{}, e.inst[:0])
		for i := range e.inst {
			me.Limits = append(me.Limits, e.meLimit(&e.inst[i], now))
		}
	}
	s.replied, s.status = true, 200
	v.Action = ActReply
	v.Reply = &Reply{
		Status: 200,
		Headers: [][2]string{
			{wire.HeaderContentType, "application/json"},
			{wire.HeaderRequestID, s.id},
		},
		Body:    me.AppendJSON(nil),
		Details: "tokentriage_me",
	}
	return v
}

// meLimit reads one instance's live numbers.
func (e *Engine) meLimit(in *govern.Instance, now time.Time) wire.MeLimit {
	l := in.Limit
	m := wire.MeLimit{
		LimitID: l.ID,
		Type:    wire.LimitType(l.Type.String()),
		Node:    in.Node,
		Period:  l.Period.String(),
		Posture: wire.Posture{Mode: l.Mode.String(), Enforce: l.Enforce.String(), Fail: l.Fail.String()},
	}
	switch l.Type {
	case govern.RPM, govern.TPM:
		p := e.rateParams(in)
		m.Amount = p.Amount
		// store: redis is answered by the replica-local limiter in this
		// build (checkRPM), and every row says so: so does this.
		m.Suspended = l.Store == govern.StoreRedis
		if in.Unresolved {
			m.Remaining = p.Burst
			if p.Burst <= 0 {
				m.Remaining = p.Amount
			}
			return m
		}
		res, err := e.cells.ratePeek(in.ID, l.Algorithm, now, p)
		if err != nil {
			m.Suspended = true
			return m
		}
		m.Observed, m.Remaining = res.Limit-res.Remaining, res.Remaining
	case govern.Concurrency:
		m.Amount = e.shareCap(in.Amount, l.Store)
		live, err := e.cells.gaugeRead(in.ID, now)
		if err != nil {
			m.Suspended = true
		}
		m.Observed, m.Remaining = live, max(m.Amount-live, 0)
	default: // LedgerSettled
		m.ResetsAt = calendar.End(l.Period.Calendar, now)
		m.Suspended = e.snap == nil || now.Sub(e.snap.generatedAt) > snapshotTrust
		observed := int64(0)
		if !in.Unresolved {
			observed = e.observed(in, now)
			if l.Reserve {
				// What the other replicas spent, from the snapshot, and
				// what this one has spent and reserved, as admission
				// counts it.
				others := max(observed-e.snapValue(in.ID+syncwire.ReplicaSuffix+e.replica, in, now), 0)
				observed = others + e.spendMine(in, now)
			}
		}
		remaining := max(in.Amount-observed, 0)
		if l.Type == govern.BudgetUSD {
			// Rows whose model has no price add no dollars: the figures
			// say they are incomplete.
			unpriced := !in.Unresolved && e.snapValue(in.ID+syncwire.UnpricedSuffix, in, now) > 0
			m.LimitUSD = wire.USD{Nanos: in.Amount}
			m.ObservedUSD = wire.USD{Nanos: observed, Estimated: true, Unpriced: unpriced}
			m.RemainingUSD = wire.USD{Nanos: remaining, Estimated: true, Unpriced: unpriced}
		} else {
			m.Amount, m.Observed, m.Remaining = in.Amount, observed, remaining
		}
	}
	return m
}
