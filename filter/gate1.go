package filter

import (
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/llm"
	"github.com/tokentriage/tokentriage/shared/rate"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// RequestHead is what gate 1 reads of the request headers.
type RequestHead struct {
	Method        string
	Path          string // :path, query included
	Authority     string
	Authorization string
	APIKey        string // x-api-key (Anthropic SDKs send the key there)
	// Route is the xds.route_name property; read only when a provider rule
	// names a route.
	Route       string
	EndOfStream bool // headers-only request
	// ContentLength is the content-length header, -1 when absent or not
	// a number.
	ContentLength int64
	// Ambiguous is set when the request repeats authorization or x-api-key
	// with different values.
	Ambiguous bool
	// ContentEncoding is the content-encoding header.
	ContentEncoding string
	// MethodOverride is an X-HTTP-Method-Override (or X-HTTP-Method,
	// X-Method-Override) header: some servers take it as the method.
	MethodOverride string
	// AnthropicVersion is set when the request carries anthropic-version:
	// its client speaks Anthropic's API (every Anthropic SDK sends it).
	AnthropicVersion bool
	// RoutingHeaders is set when the client sent x-tt-model or
	// x-tt-provider: they are the gateway's to set.
	RoutingHeaders bool
	// Customer and Tags are the headers governance.attributes names
	// (AttributeHeaders), when the request has them; AttributesRepeated
	// is set when one of them came twice with different values.
	Customer, Tags       string
	HasCustomer, HasTags bool
	AttributesRepeated   bool
}

// governedHeaders are removed from a governed request before it goes on:
// content-length, because gate 2 may rewrite the body; accept-encoding,
// because the usage the filter settles on must come back readable (a
// provider that compresses its answer leaves the filter only an estimate).
var governedHeaders = []string{"content-length", "accept-encoding"}

// heldHeaders are removed from a governed request whose headers wait for
// gate 2: its length is set there, once the body is final.
var heldHeaders = []string{"accept-encoding"}

// routingHeaders are the gateway's own: removed from what a client sends,
// so that no client picks a route by them.
var routingHeaders = []string{wire.HeaderModel, wire.HeaderProvider}

// MePath is answered by the filter itself.
const MePath = "/tt/v1/me"

// RequestHeaders is gate 1: authenticate the virtual key, build the chain,
// check the scopes known from the headers, and evaluate rpm and
// concurrency, deepest instance first, stopping at the first over.
func (e *Engine) RequestHeaders(s *Stream, h *RequestHead) Verdict {
	now := e.host.Now()
	e.refresh(now)
	s.start = now
	s.id = e.newRequestID()
	s.method = h.Method
	s.authority = h.Authority
	s.path = cleanPath(h.Path)

	s.shape = e.shapeOf(h, s.path)

	// The virtual key never reaches the upstream, whatever happens next.
	// The verdict's header list is the engine's scratch: the binding applies
	// it before the next callback.
	v := Verdict{RemoveHeaders: e.removeScratch[:0]}
	var c credential
	if key := bearer(h.Authorization); isVirtualKey(key) {
		v.RemoveHeaders = append(v.RemoveHeaders, "authorization")
		c.key, c.header = key, wire.CredentialAuthorization
	}
	ambiguous := h.Ambiguous
	if isVirtualKey(h.APIKey) {
		v.RemoveHeaders = append(v.RemoveHeaders, "x-api-key")
		if c.key == "" {
			c.key, c.header = h.APIKey, wire.CredentialAPIKey
		} else if c.key != h.APIKey {
			ambiguous = true
		}
	}
	if h.RoutingHeaders {
		// The route was chosen with them: choose it again without.
		v.RemoveHeaders = append(v.RemoveHeaders, routingHeaders...)
		v.ClearRoute = true
	}
	// A credential that is there but is not a virtual key (a provider's
	// key pasted by mistake) is named as such, not as a missing key.
	if c.key == "" {
		switch {
		case h.Authorization != "":
			c.foreign = wire.CredentialAuthorization
		case h.APIKey != "":
			c.foreign = wire.CredentialAPIKey
		}
	}

	if ambiguous && (e.armed == nil || e.plan.Enabled) {
		// Before anything else: which key would be billed is unknowable.
		// (With governance off the filter stays transparent.)
		s.local = strings.HasPrefix(s.path, "/tt/")
		return e.reject(s, v, wire.AmbiguousKey(s.id))
	}
	if strings.HasPrefix(s.path, "/tt/") {
		s.local = true
		_, query, _ := strings.Cut(h.Path, "?")
		return e.answerLocal(s, c, query, h)
	}
	if e.armed == nil {
		// No plan yet (the accountant has not answered): admit and say so.
		// The attribute headers are the gateway's: they never go upstream.
		if h.HasCustomer {
			v.RemoveHeaders = append(v.RemoveHeaders, govern.DefaultCustomerHeader)
		}
		if h.HasTags {
			v.RemoveHeaders = append(v.RemoveHeaders, govern.DefaultTagsHeader)
		}
		s.unarmed = true
		s.ep = endpointOf(h.Method, s.path)
		s.governs = s.ep != llm.Unknown && e.host.Caller != nil && !h.EndOfStream
		s.passthrough = s.ep == llm.Unknown
		if a, ent, kid := e.authenticate(c.key, now); a == authOK {
			s.kid, s.owner, s.scopes = kid, ent.owner, &ent.scopes
		}
		if s.governs {
			s.dims.Provider = e.provider(h, s.path)
			s.hadLength = h.ContentLength >= 0
			return e.holdOrGo(s, v, now)
		}
		return v
	}
	if !e.plan.Enabled {
		return v // governance is off: the filter is transparent
	}

	auth, ent, kid := e.authenticate(c.key, now)
	switch auth {
	case authUnknown:
		return e.reject(s, v, wire.UnknownKey(s.id, kid))
	case authRevoked:
		return e.reject(s, v, wire.RevokedKey(s.id, kid))
	case authExpired:
		return e.reject(s, v, wire.ExpiredKey(s.id, kid, ent.expiresAt))
	case authMalformed:
		// A key that starts as a virtual key but is not one was meant as
		// one: never billed to nobody, whatever require_key says.
		return e.reject(s, v, wire.MalformedKey(s.id, c.header))
	case authAnonymous:
		if e.plan.RequireKey {
			return e.reject(s, v, c.missing(s.id))
		}
	case authOK:
		s.kid, s.owner, s.scopes = kid, ent.owner, &ent.scopes
	}
	if ent != nil && auth == authOK {
		s.key = ent
		s.chain = append(s.chain[:0], ent.chainOf()...) // computed once per key
	} else {
		s.chain = govern.AppendChain(s.chain[:0], s.owner, s.kid)
	}
	s.ep = endpointOf(h.Method, s.path)
	s.governs = s.ep != llm.Unknown
	s.free, s.freeID = freeEndpointOf(h.Method, s.path, h.Path)
	s.dims = govern.Dims{Endpoint: s.endpoint(), Provider: e.provider(h, s.path)}
	s.passthrough = !s.governs
	if r := e.headAttributes(s, h, &v); r != nil {
		return e.reject(s, v, *r)
	}

	if s.governs && !plainPrefix(s.path[:len(s.path)-len(s.ep.String())]) {
		// A route prefix that a server on the way may decode or cut
		// (/v1/batches;/v1/chat/completions, /v1/batches%3F/…) could
		// route the call to another endpoint, governed as this one.
		e.host.Metrics.Add(MetricEndpointVariant, 1)
		raw, _, _ := strings.Cut(h.Path, "?")
		return e.reject(s, v, wire.EndpointVariant(s.id, h.Method, h.MethodOverride, raw, s.ep.String(), false))
	}
	if !s.governs && s.free == freeNone {
		// Another spelling of a governed endpoint, which a server on the
		// way may route as that endpoint: refused, never let through
		// ungoverned (see RATIONALE.md).
		// A method override header counts as the method: a server that
		// honours it would run a generation the gate let through as a
		// passthrough call.
		if ep, method := variantOf(h.Method, h.MethodOverride, h.Path); ep != llm.Unknown {
			e.host.Metrics.Add(MetricEndpointVariant, 1)
			raw, _, _ := strings.Cut(h.Path, "?")
			return e.reject(s, v, wire.EndpointVariant(s.id, h.Method, h.MethodOverride, raw, ep.String(), method))
		}
	}

	if s.free != freeNone {
		if reply := e.checkFree(s, v); reply != nil {
			return *reply
		}
		if s.modelScope != nil {
			// The list is filtered: it must come back readable.
			v.RemoveHeaders = append(v.RemoveHeaders, "accept-encoding")
		}
	} else if sc := s.scopes; sc != nil {
		switch {
		case !s.governs && !sc.AllowPassthrough:
			r := wire.ScopeDenied(s.id, s.kid, wire.ScopeAllowPassthrough, s.path, nil)
			r.Message += shortOfV1(h.Method, s.path)
			return e.reject(s, v, r)
		case s.governs && sc.Endpoints != nil && !contains(sc.Endpoints, s.dims.Endpoint):
			// The endpoints scope names provider endpoints; a passthrough
			// path is allow_passthrough's to permit.
			return e.reject(s, v, wire.ScopeDenied(s.id, s.kid, wire.ScopeEndpoints, s.dims.Endpoint, sc.Endpoints))
		case sc.Providers != nil && !contains(sc.Providers, s.dims.Provider):
			return e.reject(s, v, wire.ScopeDenied(s.id, s.kid, wire.ScopeProviders, s.dims.Provider, sc.Providers))
		case !s.governs && sc.Customers != nil && !customerAllowed(sc.Customers, s.dims.Customer):
			// A governed call's customer may come in its body: gate 2
			// checks it there.
			return e.reject(s, v, wire.ScopeDenied(s.id, s.kid, wire.ScopeCustomers, s.dims.Customer, sc.Customers))
		}
	}

	if ce := h.ContentEncoding; s.governs && ce != "" && !strings.EqualFold(ce, "identity") {
		return e.reject(s, v, wire.EncodedBody(s.id, s.dims.Endpoint, ce))
	}
	if s.governs && h.ContentLength > e.cfg.MaxBodyBytes {
		// Refused before gate 1 counts anything: the body could never be
		// read, whatever the limits say.
		return e.reject(s, v, wire.TooLarge(s.id, e.cfg.MaxBodyBytes))
	}

	s.hadLength = h.ContentLength >= 0
	return e.gate1Walk(s, e.resolveGate(s, govern.Gate1), now, h.EndOfStream, v)
}

// resolveGate resolves the request's chain at gate g (Gate1 or Gate2).
// The instances of a keyed request are kept with its key's entry and used
// again by the key's next request with the same dims, until a plan is
// armed or a sync moves the plan, the runtime plane or the keys
// (resolveGen): a key in steady use resolves its chain once per such
// change, not per request (at most
// resolvedKeys keys keep theirs: keepResolved). The slice returned is
// valid until the next resolveGate of the same key and gate; callers that
// change instances (bindValues) change a copy.
func (e *Engine) resolveGate(s *Stream, g govern.Gate) []govern.Instance {
	var c *resolvedChain
	if s.key != nil && (g == govern.Gate1 || g == govern.Gate2) {
		c = &s.key.resolved[g-govern.Gate1]
		if c.armed == e.armed && c.gen == e.resolveGen && c.dims == s.dims {
			return c.inst
		}
	}
	e.facts = e.chainFacts(s.chain, e.facts)
	e.inst = e.armed.ResolveFacts(s.chain, e.facts, s.dims, g, e.inst[:0])
	if c == nil {
		return e.inst
	}
	e.keepResolved(s.key)
	*c = resolvedChain{gen: e.resolveGen, armed: e.armed, dims: s.dims, inst: append(c.inst[:0], e.inst...)}
	return c.inst
}

// gate1Walk evaluates the gate-1 instances in order, stopping at the first
// over, then hands a headers-only request to gate 2. It runs in the
// headers callback, or again, from where it stopped, when the lease a
// request waited for is answered (s.wait).
func (e *Engine) gate1Walk(s *Stream, insts []govern.Instance, now time.Time, eos bool, v Verdict) Verdict {
	start := 0
	if s.wait.resume && s.wait.gate == 1 {
		start = s.wait.pos // the instance there takes the answer (leaseWait.answered)
	}
	for i := start; i < len(insts); i++ {
		in := &insts[i]
		var reply *Verdict
		wait := false
		switch in.Limit.Type {
		case govern.RPM:
			reply, wait = e.checkRPM(s, in, i, now, v)
		case govern.Concurrency:
			reply, wait = e.checkConcurrency(s, in, i, now, v)
		}
		if wait {
			// The request waits for its lease, its headers edited as they
			// go on (see holdOrGo); held headers are edited when gate 2
			// decides.
			w := &s.wait
			w.inst = append(w.inst[:0], insts...)
			w.gate, w.eos = 1, eos
			if s.governs && !eos && !w.edited && !e.holding(s, now) {
				v.RemoveHeaders = append(v.RemoveHeaders, governedHeaders...)
				w.edited = true
			}
			v.Action = ActPause
			return v
		}
		if reply != nil {
			e.releaseLeases(s, now)
			return *reply
		}
	}
	s.wait.since = time.Time{}

	if s.governs {
		if eos {
			s.held = true // still in the headers callback: gate 2 may set them
			return e.gate2(s, nil, v)
		}
		return e.holdOrGo(s, v, now)
	}
	if s.passthrough && s.free == freeNone {
		if reply := e.checkPassthroughQuota(s, now, v); reply != nil {
			e.releaseLeases(s, now)
			return *reply
		}
	}
	return v
}

// checkPassthroughQuota checks the quota_requests instances a passthrough
// call matches (by its path, as the accountant folds its row), as gate 2
// checks them for a governed call: a passthrough call is a request like
// any other. Budgets and token quotas cannot price it, and free calls
// (the model list, token counts) count nothing.
func (e *Engine) checkPassthroughQuota(s *Stream, now time.Time, v Verdict) *Verdict {
	e.inst = e.armed.Resolve(s.chain, s.dims, govern.Gate2, e.inst[:0])
	for i := range e.inst {
		if in := &e.inst[i]; in.Limit.Type == govern.QuotaRequests {
			if reply := e.checkSettled(s, in, now, v); reply != nil {
				return reply
			}
		}
	}
	return nil
}

// holdOrGo ends gate 1 for a governed request with a body. With
// hold_headers the headers wait (a Pause the host honours as
// StopIteration) until gate 2 decides. Otherwise they go on now (a Pause
// would hold the body back from this filter too, in Envoy); the body is
// buffered at gate 2, and its length may change there (stream_options), so
// the length header goes, as Envoy's ext_proc does for a mutable body.
func (e *Engine) holdOrGo(s *Stream, v Verdict, now time.Time) Verdict {
	if e.holding(s, now) {
		s.held = true
		v.RemoveHeaders = append(v.RemoveHeaders, heldHeaders...)
		v.Action = ActPause
		return v
	}
	if !contains(v.RemoveHeaders, governedHeaders[0]) && !s.wait.edited {
		v.RemoveHeaders = append(v.RemoveHeaders, governedHeaders...)
	}
	return v
}

// holding reports whether the governed request s waits at its headers for
// gate 2 (hold_headers), decided once per request: while this host seems
// unable to hold (hold.go), one request every HoldRetry is held to try
// again.
func (e *Engine) holding(s *Stream, now time.Time) bool {
	if !s.holdChosen {
		s.holdChosen = true
		switch {
		case !e.cfg.HoldHeaders:
		case e.holdBrokenAt.IsZero():
			s.holdIt = true
		case now.Sub(e.holdBrokenAt) >= HoldRetry && now.Sub(e.holdProbeAt) >= HoldRetry:
			e.holdProbeAt, s.holdIt = now, true
		}
	}
	return s.holdIt
}

// checkRPM takes one arrival from the instance's cell; i is the instance's
// position in the gate's walk. A store: redis instance takes it from the
// replica's lease of the fleet's cell (leaserate.go), and may wait for
// one; it returns wait then.
func (e *Engine) checkRPM(s *Stream, in *govern.Instance, i int, now time.Time, v Verdict) (*Verdict, bool) {
	l := in.Limit
	p := e.rateParams(in)
	var res rate.Result
	switch {
	case l.Store == govern.StoreRedis && e.leased(in):
		e.seeLease(leaseKey(kindRate, in.CellKey()), in)
		d := e.leaseRate(s, in, i, 1, now, v)
		if d.wait || d.reply != nil {
			return d.reply, d.wait
		}
		res = d.res
	default:
		if why := e.storeDistrust(l.Store); why != "" {
			// Uncheckable: a fail: closed hard limit answers 503;
			// otherwise the local cell answers and the request says
			// suspended.
			if reply := e.uncheckable(s, in, v, why); reply != nil {
				return reply, false
			}
		}
		var err error
		res, err = e.cells.rateTake(in.CellKey(), l.Algorithm, now, 1, p)
		if err != nil {
			return e.uncheckable(s, in, v, "its shared-data cell could not be updated: "+err.Error()), false
		}
	}
	if res.Allowed {
		disclose(&s.disclosure.Requests, l, p, res.Remaining)
		if len(l.Thresholds) > 0 {
			used := res.Limit - res.Remaining
			e.gateAlerts(in, used-1, used, res.Limit, now)
		}
		return nil, false
	}
	if !e.over(s, in) {
		// Admitted over its cap (shadow, soft): the served answer still
		// advertises the limit, with nothing remaining.
		disclose(&s.disclosure.Requests, l, p, res.Remaining)
		return nil, false
	}
	r := wire.Refusal{
		RequestID:  s.id,
		LimitID:    l.ID,
		LimitType:  wire.LimitType(l.Type.String()),
		Node:       in.Node,
		Period:     l.Period.String(),
		RetryAfter: wire.Seconds(res.RetryAfter),
		Wait:       res.RetryAfter,
	}
	return e.refuse(s, v, &r, in), false
}

// storeDistrust says why a rate or concurrency limit of store st cannot be
// checked now, "" when it can: store: redis without an accountant (the
// filter reaches the fleet through it), and store: share while the
// accountant's count of the fleet's replicas, which share divides by,
// comes from a shared Redis it cannot read.
func (e *Engine) storeDistrust(st govern.Store) string {
	switch {
	case st == govern.StoreRedis:
		return "no accountant is configured, and the filter reaches the fleet store (store: redis) through it"
	case st == govern.StoreShare && e.fleetStore:
		if why := e.fleetDistrust(); why != "" {
			return "store: share divides by the fleet's replica count as last read (" + strconv.Itoa(e.replicas) + "): " + why
		}
	}
	return ""
}

// checkConcurrency takes a lease on the instance's gauge; under store:
// share with the fleet's Redis, on the replica's slots (leaseslots.go),
// and it may wait for one.
func (e *Engine) checkConcurrency(s *Stream, in *govern.Instance, i int, now time.Time, v Verdict) (*Verdict, bool) {
	l := in.Limit
	if l.Store == govern.StoreShare && e.leased(in) {
		e.seeLease(leaseKey(kindSlots, in.CellKey()), in)
		return e.checkSlots(s, in, i, now, v)
	}
	limit := e.shareCap(in.Amount, l.Store)
	if why := e.storeDistrust(l.Store); why != "" {
		if reply := e.uncheckable(s, in, v, why); reply != nil {
			return reply, false
		}
	}
	taken, live, hold, err := e.cells.gaugeAcquire(in.CellKey(), limit, false, now, e.leaseTTL)
	if err != nil {
		return e.uncheckable(s, in, v, "its shared-data gauge could not be updated: "+err.Error()), false
	}
	if taken {
		s.leases = append(s.leases, lease{hold: hold})
		if len(l.Thresholds) > 0 {
			e.gateAlerts(in, live, live+1, limit, now)
		}
		return nil, false
	}
	if !e.over(s, in) {
		return nil, false
	}
	r := wire.Refusal{
		RequestID: s.id,
		LimitID:   l.ID,
		LimitType: wire.Concurrency,
		Node:      in.Node,
		Observed:  live,
		Limit:     limit,
	}
	return e.refuse(s, v, &r, in), false
}

// disclose makes an rpm or tpm instance the disclosed policy when it is the
// tightest so far (the least remaining) among the enforcing ones: a limit
// in shadow mode or soft enforcement refuses nothing, so it never paces a
// client, and is advertised only while no enforcing limit is.
func disclose(pol *wire.Policy, l *govern.Limit, p rate.Params, remaining int64) {
	advisory := l.Mode != govern.ModeOn || l.Enforce != govern.EnforceHard
	switch {
	case pol.LimitID == "":
	case advisory && !pol.Advisory:
		return // an enforcing limit is advertised already
	case !advisory && pol.Advisory:
	case remaining >= pol.Remaining:
		return
	}
	*pol = wire.Policy{LimitID: l.ID, Quota: p.Amount, Window: l.Period.Window, Remaining: remaining, Advisory: advisory}
}

// rateParams are an rpm or tpm instance's numbers, divided among the live
// replicas for store: share.
func (e *Engine) rateParams(in *govern.Instance) rate.Params {
	l := in.Limit
	return rate.Params{
		Amount: e.shareCap(in.Amount, l.Store),
		Period: l.Period.Window,
		Burst:  e.shareCap(l.Burst, l.Store),
	}
}

// shareCap divides a cap by the live replica count for store: share
// (rounding up, so a fleet never drops below the cap it was given).
func (e *Engine) shareCap(v int64, st govern.Store) int64 {
	if st != govern.StoreShare || e.replicas <= 1 {
		return v
	}
	n := int64(e.replicas)
	return (v + n - 1) / n
}

// over records an instance that is over its cap and reports whether the
// request must be refused: shadow records the would-refuse, soft records
// the breach, and both admit.
func (e *Engine) over(s *Stream, in *govern.Instance) bool {
	l := in.Limit
	ref := ledger.Ref{LimitID: l.ID, LimitType: l.Type.String(), Node: in.Node}
	switch {
	case l.Mode == govern.ModeShadow:
		s.shadow = append(s.shadow, ref)
		e.host.Metrics.Add(MetricShadowRefused, 1)
		return false
	case l.Enforce == govern.EnforceSoft:
		s.breached = append(s.breached, ref)
		e.host.Metrics.Add(MetricSoftBreach, 1)
		return false
	}
	return true
}

// uncheckable handles a limit that cannot be checked right now: a 503 when
// it is on, hard and fail: closed; otherwise admitted and listed as
// suspended.
func (e *Engine) uncheckable(s *Stream, in *govern.Instance, v Verdict, why string) *Verdict {
	l := in.Limit
	if l.Mode == govern.ModeOn && l.Enforce == govern.EnforceHard && l.Fail == govern.FailClosed {
		r := wire.Uncheckable(s.id, l.ID, wire.LimitType(l.Type.String()), in.Node, why)
		s.refusal = refusalInfo{errorType: r.Type, by: &ledger.Ref{LimitID: l.ID, LimitType: l.Type.String(), Node: in.Node}}
		e.host.Metrics.Add(MetricRejected, 1)
		return e.replyRejection(s, v, &r)
	}
	if !contains(s.suspended, l.ID) {
		s.suspended = append(s.suspended, l.ID)
		e.host.Metrics.Add(MetricSuspended, 1)
	}
	return nil
}

// refuse answers a limit breach with its 429.
func (e *Engine) refuse(s *Stream, v Verdict, r *wire.Refusal, in *govern.Instance) *Verdict {
	if s.fb.trying || e.holdFallback(s, r, in) {
		// The walk answers: the fallback is tried, or it was and the
		// refusal held for it stands (fallback.go).
		return &v
	}
	return e.answerRefusal(s, v, r, in)
}

// answerRefusal answers the refusal r of instance in: its 429, counted.
func (e *Engine) answerRefusal(s *Stream, v Verdict, r *wire.Refusal, in *govern.Instance) *Verdict {
	l := in.Limit
	if l.Type.Class() == govern.LedgerSettled {
		r.Bound = e.bound(e.host.Now())
	}
	r.Shape = s.shape
	s.refusal = refusalInfo{errorType: r.ErrorType(), by: &ledger.Ref{LimitID: l.ID, LimitType: l.Type.String(), Node: in.Node}}
	e.host.Metrics.Add(refusedMetric(l.Type), 1)
	e.host.Metrics.Refused(l.ID, l.Type.String())
	s.replied, s.status = true, r.Status()
	v.Action = ActReply
	h := r.AppendHeaders(nil)
	if len(s.suspended) > 0 {
		// Decided by this replica alone (the fleet did not decide): the
		// refusal says so, as a served answer does.
		h = append(h, [2]string{HeaderSuspended, strings.Join(s.suspended, ",")})
	}
	v.Reply = &Reply{Status: r.Status(), Headers: h, Body: r.AppendBody(nil), Details: "tokentriage_" + r.ErrorType()}
	return &v
}

// EditFailed answers a request whose edits the host refused (what names
// the edit) with a 500, handing back what the gates took: it was never
// sent to the provider.
func (e *Engine) EditFailed(s *Stream, what string, err error) Verdict {
	now := e.host.Now()
	e.returnReserves(s, now)
	e.settleSpend(s, false, now)
	e.releaseLeases(s, now)
	s.forwarded = false
	e.logf(LogError, "request %s: %s failed (%v); answered 500 instead of sending it on", s.id, what, err)
	return e.reject(s, Verdict{}, wire.EditFailed(s.id, what, err.Error()))
}

// reject answers a refusal that is not a limit breach (401, 403, 400, 413,
// 503, 404, 405).
func (e *Engine) reject(s *Stream, v Verdict, r wire.Rejection) Verdict {
	s.refusal = refusalInfo{errorType: r.Type}
	e.host.Metrics.Add(MetricRejected, 1)
	return *e.replyRejection(s, v, &r)
}

func (e *Engine) replyRejection(s *Stream, v Verdict, r *wire.Rejection) *Verdict {
	r.Shape = s.shape
	s.replied, s.status = true, r.Status
	v.Action = ActReply
	v.Reply = &Reply{Status: r.Status, Headers: r.AppendHeaders(nil), Body: r.AppendBody(nil), Details: "tokentriage_" + r.Type}
	return &v
}

func refusedMetric(t govern.Type) Metric {
	switch t {
	case govern.BudgetUSD:
		return MetricRefusedBudget
	case govern.QuotaTokens:
		return MetricRefusedQuotaTokens
	case govern.QuotaRequests:
		return MetricRefusedQuotaRequests
	case govern.RPM:
		return MetricRefusedRPM
	case govern.TPM:
		return MetricRefusedTPM
	}
	return MetricRefusedConcurrency
}

// releaseLeases hands back every lease the request still holds, exactly
// once each.
func (e *Engine) releaseLeases(s *Stream, now time.Time) { e.releaseLeasesFrom(s, 0, now) }

// releaseLeasesFrom hands back the leases from the from-th on.
func (e *Engine) releaseLeasesFrom(s *Stream, from int, now time.Time) {
	for i := from; i < len(s.leases); i++ {
		if l := &s.leases[i]; !l.released {
			l.released = true
			if err := e.cells.gaugeRelease(l.hold, now, e.leaseTTL); err != nil {
				e.logf(LogWarn, "releasing a concurrency lease on %s: %v (it expires on its own)", l.hold.key, err)
			}
		}
	}
}

// provider names the request's provider from the configured rules, else
// from the path.
func (e *Engine) provider(h *RequestHead, path string) string {
	for i := range e.cfg.Providers {
		p := &e.cfg.Providers[i]
		if (p.Route == "" || p.Route == h.Route) &&
			(p.Authority == "" || strings.EqualFold(p.Authority, h.Authority)) &&
			(p.PathPrefix == "" || strings.HasPrefix(path, p.PathPrefix)) {
			return p.Name
		}
	}
	if anthropicPath(path) || h.AnthropicVersion && llm.EndpointOf(path) == llm.Unknown {
		// Anthropic's paths, and a client speaking Anthropic's API on a
		// path both providers serve (/v1/models).
		return "anthropic"
	}
	return "openai"
}

// NeedsRoute reports whether provider rules read the route name, so the
// binding fetches the xds.route_name property only then.
func (e *Engine) NeedsRoute() bool {
	for i := range e.cfg.Providers {
		if e.cfg.Providers[i].Route != "" {
			return true
		}
	}
	return false
}

func bearer(h string) string {
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

func isVirtualKey(s string) bool { return strings.HasPrefix(s, "tt-vk_") }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// cleanPath is the request path the filter classifies and governs: the
// query string dropped, and the path cleaned (doubled slashes, "." and ".."
// segments and a trailing slash resolved), so that "//v1/chat/completions/"
// is the chat completions endpoint it reaches at the provider, not a path
// that slips past a limit or a scope matched on the plain spelling. A path
// that is already clean is returned as it is, without allocating.
func cleanPath(p string) string {
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	return path.Clean(p)
}

// endpoint is the endpoint dim of the request: the canonical path of a
// governed endpoint (also when it sits under a route prefix, as in
// /openai/v1/chat/completions), else the cleaned path.
func (s *Stream) endpoint() string {
	if s.ep != llm.Unknown {
		return s.ep.String()
	}
	return s.path
}

// credential is what a request presented as its virtual key.
type credential struct {
	key    string // a virtual key (tt-vk_…), or ""
	header string // where key came from (wire.CredentialAuthorization or wire.CredentialAPIKey)
	// foreign names the header of a credential that is not a virtual key,
	// when key is "".
	foreign string
}

// missing is the 401 for a request without a virtual key: "missing", or,
// when it carries a credential of another kind, "not a virtual key",
// naming its header.
func (c credential) missing(requestID string) wire.Rejection {
	if c.foreign != "" {
		return wire.ForeignKey(requestID, c.foreign)
	}
	return wire.MissingKey(requestID)
}

// shapeOf is the body shape of the gateway's own answers to a request:
// Anthropic's envelope on Anthropic's paths (/v1/messages and below it) and
// to a client that speaks Anthropic's API (it sends anthropic-version);
// seed 000's body, with OpenAI's param and code when the plan asks for
// them, on OpenAI paths; seed 000's always on the gateway's own /tt/ paths.
func (e *Engine) shapeOf(h *RequestHead, path string) wire.Shape {
	switch {
	case strings.HasPrefix(path, "/tt/"):
		return wire.ShapeSeed
	case h.AnthropicVersion || anthropicPath(path):
		return wire.ShapeAnthropic
	case e.plan != nil && e.plan.ProviderRefusals:
		return wire.ShapeOpenAI
	}
	return wire.ShapeSeed
}

// anthropicPath reports whether a cleaned path is one of Anthropic's
// Messages API (/v1/messages, /v1/messages/count_tokens,
// /v1/messages/batches…), also under a route prefix.
func anthropicPath(p string) bool {
	const messages = "/v1/messages"
	i := strings.Index(p, messages)
	return i >= 0 && (len(p) == i+len(messages) || p[i+len(messages)] == '/')
}

// variantOf reports the governed endpoint a POST (in any letter case, or
// named by a method override header) spells otherwise, and whether only
// its method is the other spelling ("post", or GET with an override);
// Unknown when it spells none.
func variantOf(method, override, rawPath string) (ep llm.Endpoint, methodOnly bool) {
	m := method
	if override != "" {
		m = override
	}
	if !strings.EqualFold(m, "POST") {
		return llm.Unknown, false
	}
	if ep := llm.VariantOf(rawPath); ep != llm.Unknown {
		return ep, false
	}
	if m != "POST" || override != "" {
		return llm.EndpointOf(cleanPath(rawPath)), true
	}
	return llm.Unknown, false
}

// endpointOf classifies the request: a governed endpoint only for POST, the
// one method that generates; GET /v1/chat/completions (OpenAI's list of
// stored completions), HEAD and OPTIONS are passthrough calls with no body
// to read.
// shortOfV1 is what a refusal of path adds when the path is a provider
// endpoint one /v1 short (a client whose base URL lacks it: @ai-sdk/anthropic
// given the gateway's bare address calls /messages), else "".
func shortOfV1(method, path string) string {
	v1 := "/v1" + path
	if endpointOf(method, v1) == llm.Unknown {
		if k, _ := freeKindOf(method, v1); k == freeNone {
			return ""
		}
	}
	return "; " + strconv.Quote(v1) + " is a provider endpoint: the client's base URL is one /v1 short (end it with /v1 for OpenAI's SDKs and the Vercel AI SDK's providers; Anthropic's SDKs add /v1 themselves)"
}

func endpointOf(method, path string) llm.Endpoint {
	if method != "POST" {
		return llm.Unknown
	}
	return llm.EndpointOf(path)
}
