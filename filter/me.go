package filter

import (
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/llm"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// answerLocal answers the /tt/ paths the filter serves itself: GET
// /tt/v1/me, and 404/405 for the rest, so nothing under /tt/ reaches a
// provider.
func (e *Engine) answerLocal(s *Stream, c credential, query string, h *RequestHead) Verdict {
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
	auth, ent, kid := e.authenticate(c.key, e.host.Now())
	switch auth {
	case authUnknown:
		return e.reject(s, v, wire.UnknownKey(s.id, kid))
	case authRevoked:
		return e.reject(s, v, wire.RevokedKey(s.id, kid))
	case authExpired:
		return e.reject(s, v, wire.ExpiredKey(s.id, kid, ent.expiresAt))
	case authMalformed:
		return e.reject(s, v, wire.MalformedKey(s.id, c.header))
	case authAnonymous:
		if e.plan.Enabled && e.plan.RequireKey {
			return e.reject(s, v, c.missing(s.id))
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
			KID:       kid,
			Name:      ent.name,
			ExpiresAt: ent.expiresAt,
			Node:      ent.owner,
			Scopes: wire.Scopes{
				Models:           ent.scopes.Models,
				Providers:        ent.scopes.Providers,
				Endpoints:        ent.scopes.Endpoints,
				AllowPassthrough: ent.scopes.AllowPassthrough,
				Customers:        ent.scopes.Customers,
			},
		}
	} else {
		me = wire.Me{Node: govern.Global, Scopes: wire.Scopes{AllowPassthrough: true}}
	}
	s.chain = govern.AppendChain(s.chain[:0], s.owner, s.kid)
	me.Chain = s.chain
	if e.plan.Enabled {
		q := meDims(query)
		// The caller's customer: its header, as on a call, or ?customer=.
		if r := e.headAttributes(s, h, &v); r != nil {
			return e.reject(s, v, *r)
		}
		if s.hasCustomer {
			q.Customer = s.dims.Customer
		}
		if s.hasTags {
			q.Tags = s.dims.Tags
		}
		if q.Customer != "" {
			if msg := govern.CustomerID.Check(q.Customer); msg != "" {
				return e.reject(s, v, wire.BadIdentifier(s.id, "the customer asked for", msg, ""))
			}
		}
		e.facts = e.chainFacts(s.chain, e.facts)
		e.inst = e.armed.ResolveAllFacts(s.chain, e.facts, q, e.inst[:0])
		for i := range e.inst {
			in := &e.inst[i]
			x := e.meBind(in, now)
			m := e.meLimit(in, now)
			m.Extra.Overflow, m.Extra.Distinct = x.Overflow, x.Distinct
			if in.Unresolved {
				// Counted per value (a model, customer or tag) and the
				// caller named none (?model=, X-Tt-Customer).
				e.fullestModel(in, &m, now)
			} else if in.Limit.PerValue() {
				e.meValue(in, q, &m)
			}
			me.Limits = append(me.Limits, m)
		}
	}
	s.replied, s.status = true, 200
	v.Action = ActReply
	v.Reply = &Reply{
		Status:  200,
		Headers: wire.RequestIDHeaders([][2]string{{wire.HeaderContentType, "application/json"}}, s.id),
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
		Extra:   l.Extra(),
	}
	m.Extra.MaxDistinct = l.DisclosedMaxDistinct()
	switch l.Type {
	case govern.RPM, govern.TPM:
		p := e.rateParams(in)
		m.Amount = p.Amount
		m.ResetsAt = ceilSecond(now)
		if l.Store == govern.StoreRedis && !in.Unresolved && e.host.Caller != nil {
			// The cell lives in the fleet's Redis, which this page does not
			// ask: it shows the fleet's last answer this replica received
			// (noteFleetSeen), drained to now, with what this replica's lot
			// still holds; or, while the fleet does not decide, the
			// replica's share, flagged suspended.
			c, _, _, err := e.leaseGet(leaseKey(kindRate, in.CellKey()), kindRate)
			if err == nil && c.downSince == 0 {
				if res, next, found, err := e.cells.ratePeekFound(fleetSeenKey(in.CellKey()), l.Algorithm, now, p); err == nil && found {
					if c.expires > now.UnixNano() {
						res.Remaining = min(res.Remaining+max(c.units, 0), res.Limit)
						if res.Remaining > 0 {
							next = 0
						}
					}
					m.Observed, m.Remaining = res.Limit-res.Remaining, res.Remaining
					m.RetryAfter = wire.Seconds(next)
					m.ResetsAt = ceilSecond(now.Add(res.ResetAfter))
					return m
				}
			}
			if err != nil || c.downSince != 0 {
				m.Suspended = true
				sp := e.shareParams(in, &c)
				m.Amount = sp.Amount
				if res, next, err := e.cells.ratePeek(shareKey(in.CellKey()), l.Algorithm, now, sp); err == nil {
					m.Observed, m.Remaining = res.Limit-res.Remaining, res.Remaining
					m.RetryAfter = wire.Seconds(next)
					m.ResetsAt = ceilSecond(now.Add(res.ResetAfter))
				}
				return m
			}
		}
		if why := e.storeDistrust(l.Store); why != "" && (l.Store != govern.StoreRedis || e.host.Caller == nil) {
			m.Suspended = true
		}
		if in.Unresolved {
			m.Remaining = p.Burst
			if p.Burst <= 0 {
				m.Remaining = p.Amount
			}
			return m
		}
		res, next, err := e.cells.ratePeek(in.CellKey(), l.Algorithm, now, p)
		if err != nil {
			m.Suspended = true
			return m
		}
		m.Observed, m.Remaining = res.Limit-res.Remaining, res.Remaining
		// When the next unit frees (seconds, rounded up, as a 429's
		// retry_after_s) and when the cell is back at its full burst.
		m.RetryAfter = wire.Seconds(next)
		m.ResetsAt = ceilSecond(now.Add(res.ResetAfter))
	case govern.Concurrency:
		m.Amount = e.shareCap(in.Amount, l.Store)
		live, err := e.cells.gaugeRead(in.CellKey(), now)
		if err != nil || e.storeDistrust(l.Store) != "" {
			m.Suspended = true
		}
		if l.Store == govern.StoreShare && e.leased(in) {
			// The fleet's slots: this replica's calls in flight and the
			// slots the others hold, as last answered.
			m.Amount = in.Amount
			c, _, _, err := e.leaseGet(leaseKey(kindSlots, in.CellKey()), kindSlots)
			m.Suspended = err != nil || c.downSince != 0
			live = min(addSpend(live, max(c.fleetA, 0)), in.Amount)
			if m.Suspended {
				m.Amount = max(c.units, replicaShare(in.Amount, max(c.replicas, int64(e.replicas), 1)))
			}
		}
		m.Observed, m.Remaining = live, max(m.Amount-live, 0)
	default: // LedgerSettled
		m.ResetsAt = e.resetsAt(in, now)
		m.Suspended = e.snapshotDistrust(now) != "" || e.fleetDistrust() != "" || !l.Reserve && e.rowsDistrust(now) != ""
		if l.Reserve && e.leased(in) && !in.Unresolved {
			c, _, _, err := e.leaseGet(leaseKey(kindSpend, in.CellKey()), kindSpend)
			m.Suspended = m.Suspended || err != nil || c.downSince != 0
		}
		observed := int64(0)
		if !in.Unresolved {
			observed = e.observed(in, now)
			if l.Reserve {
				// What the other replicas spent, from the snapshot, and
				// what this one has spent and reserved, as admission
				// counts it.
				others := e.othersSpent(in, now, e.snapValue(in.ID+syncwire.ReplicaSuffix+e.replica, in, now))
				observed = max(others+e.spendMine(in, now), 0)
			}
		}
		remaining := max(in.Amount-observed, 0)
		if l.Type == govern.BudgetUSD {
			// Rows whose model has no price add no dollars: the figures
			// say they are incomplete. Rows whose usage the gateway had to
			// estimate (no usage in the answer, a client that left) make
			// them estimates, and so does this replica's own running spend
			// in reserve mode while it holds more than the accountant has
			// folded (calls in flight are counted at their dearest cost).
			unpriced := !in.Unresolved && e.snapValue(in.ID+syncwire.UnpricedSuffix, in, now) > 0
			estimated := !in.Unresolved && (e.snapValue(in.ID+syncwire.EstimatedSuffix, in, now) > 0 ||
				l.Reserve && e.spendMine(in, now) > e.snapValue(in.ID+syncwire.ReplicaSuffix+e.replica, in, now))
			m.LimitUSD = wire.USD{Nanos: in.Amount}
			m.ObservedUSD = wire.USD{Nanos: observed, Estimated: estimated, Unpriced: unpriced}
			m.RemainingUSD = wire.USD{Nanos: remaining, Estimated: estimated, Unpriced: unpriced}
		} else {
			m.Amount, m.Observed, m.Remaining = in.Amount, observed, remaining
		}
	}
	return m
}

// meDims reads the dims a caller may give /tt/v1/me (?model=, ?provider=,
// ?endpoint=) to see the counters of limits narrowed by match.
func meDims(query string) govern.Dims {
	var d govern.Dims
	for query != "" {
		var kv string
		kv, query, _ = strings.Cut(query, "&")
		k, v, _ := strings.Cut(kv, "=")
		v = unescapeQuery(v)
		switch k {
		case "model":
			d.Model = v
		case "provider":
			d.Provider = v
		case "customer":
			d.Customer = v
		case "tag":
			d.Tags, _ = govern.ParseTags(v)
		case "endpoint":
			// As a request's endpoint: cleaned, and canonical when governed.
			d.Endpoint = cleanPath(v)
			if ep := llm.EndpointOf(d.Endpoint); ep != llm.Unknown {
				d.Endpoint = ep.String()
			}
		}
	}
	return d
}

// unescapeQuery decodes a query value ('+' and %XX); a malformed escape
// is kept as written.
func unescapeQuery(v string) string {
	if !strings.ContainsAny(v, "+%") {
		return v
	}
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '+':
			b = append(b, ' ')
		case c == '%' && i+2 < len(v) && isHex(v[i+1]) && isHex(v[i+2]):
			b = append(b, unhex(v[i+1])<<4|unhex(v[i+2]))
			i += 2
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// fullestModel shows, for a spend or quota limit counted per model when
// the caller named no model, the fullest of its per-model counters in the
// snapshot (syncwire.FullestSuffix; ask /tt/v1/me?model=NAME for one
// model's). A rate limit's
// per-model cells cannot be listed from the gateway's shared data: its row
// shows no model's use.
func (e *Engine) fullestModel(in *govern.Instance, m *wire.MeLimit, now time.Time) {
	l := in.Limit
	if l.Type.Class() != govern.LedgerSettled {
		return
	}
	// The accountant keeps the fullest of the instance's per-value
	// counters as an entry of its own: the values are not listed here.
	fullest := e.snapValue(govern.DistinctBase(l, in.Node)+syncwire.FullestSuffix, in, now)
	remaining := max(in.Amount-fullest, 0)
	if l.Type == govern.BudgetUSD {
		m.ObservedUSD.Nanos, m.RemainingUSD.Nanos = fullest, remaining
	} else {
		m.Observed, m.Remaining = fullest, remaining
	}
}

// meBind gives a per-value instance the counter its value has, as gate 2
// would (bindValues), without taking a slot: which counter /tt/v1/me
// shows, whether it is the overflow counter, and how many counters of
// their own the instance's values have this period (-1 when only the
// gateway's cells know, which it does not count).
func (e *Engine) meBind(in *govern.Instance, now time.Time) wireOverflow {
	x := wireOverflow{Distinct: -1}
	l := in.Limit
	if !l.PerValue() {
		return x
	}
	if l.Type.Class() == govern.LedgerSettled {
		x.Distinct = e.snapValue(govern.DistinctBase(l, in.Node)+distinctSuffix, in, now)
	}
	if in.Unresolved {
		return x
	}
	if ownCells(l) {
		in.Cell, x.Overflow, _ = e.valueSlot(in, now, false)
	}
	if l.Type.Class() == govern.LedgerSettled && e.settledFull(in, now) {
		in.ID, x.Overflow = govern.OverflowIdentity(l, in.Node), true
	}
	return x
}

// wireOverflow is what /tt/v1/me says of a per-value instance's bound.
type wireOverflow struct {
	Overflow bool
	Distinct int64
}

// meValue says which value's counter a per-value row shows: the
// customer and the tag it counts.
func (e *Engine) meValue(in *govern.Instance, q govern.Dims, m *wire.MeLimit) {
	d := in.Limit.InstanceDims(q, in.Tag)
	if in.Limit.Match.Customer != "" {
		c := d.Customer
		m.Extra.Customer = &c
	}
	if in.Limit.Match.Tag != "" {
		m.Extra.Tag = d.Tags
	}
}

// ceilSecond rounds t up to a whole second, as resets_at is printed: a
// client that waits until then is never early.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}
