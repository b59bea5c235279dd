package filter

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/tokentriage/tokentriage/filter/proxywasm"
	"github.com/tokentriage/tokentriage/shared/pluginconf"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// This file binds the engine to the proxy-wasm ABI: the SDK's context
// interfaces on one side, the Engine's narrow interfaces on the other.

// NewVMContext is the filter's VM context, registered from cmd/filter's
// init() with proxywasm.SetVMContext.
func NewVMContext() types.VMContext { return &vmContext{} }

type vmContext struct{ types.DefaultVMContext }

var _ types.VMContext = (*vmContext)(nil)

func (*vmContext) NewPluginContext(id uint32) types.PluginContext { return &pluginContext{id: id} }

type pluginContext struct {
	types.DefaultPluginContext
	id      uint32
	engine  *Engine
	counter [metricCount]proxywasm.MetricCounter
	// gauges and their last values (a VM adds the change of its own
	// share, so the host's stat sums every VM's); refusals are the
	// counters by limit, defined on first use.
	gauges    [gaugeCount]proxywasm.MetricGauge
	gaugeLast [gaugeCount]int64
	refusals  map[string]proxywasm.MetricCounter
	// held are the requests whose headers wait for gate 2 and that no body
	// callback has reached yet, by context id, with when they paused.
	held map[uint32]heldRequest
}

type heldRequest struct {
	c     *httpContext
	since time.Time
}

var _ types.PluginContext = (*pluginContext)(nil)

// OnPluginStart decodes and checks the plugin configuration; a bad one
// fails the start (Envoy then refuses the configuration) with every problem
// logged.
func (p *pluginContext) OnPluginStart(int) types.OnPluginStartStatus {
	raw, err := proxywasm.GetPluginConfiguration()
	if err != nil && !errors.Is(err, types.ErrorStatusNotFound) {
		proxywasm.LogCriticalf("tokentriage: reading the plugin configuration: %v", err)
		return types.OnPluginStartStatusFailed
	}
	cfg, err := pluginconf.Decode(raw)
	if err != nil {
		proxywasm.LogCriticalf("tokentriage: the plugin configuration is invalid:\n%v", err)
		return types.OnPluginStartStatusFailed
	}
	for i, name := range MetricNames {
		p.counter[i] = proxywasm.DefineCounterMetric(name)
	}
	for i, name := range GaugeNames {
		p.gauges[i] = proxywasm.DefineGaugeMetric(name)
	}
	h := Host{
		Store:    &sharedData{buf: make([]byte, 0, 256)},
		Now:      time.Now,
		Metrics:  p,
		Log:      hostLog,
		Upstream: upstreamName,
	}
	// The runtime's generator is seeded from the host's random source
	// (WASI random_get); request ids need uniqueness, not secrecy.
	for i := 0; i < len(h.Seed); i += 8 {
		binary.LittleEndian.PutUint64(h.Seed[i:], rand.Uint64())
	}
	if a := cfg.Accountant; a != nil {
		token, err := a.BearerToken(os.Getenv) // the VM's WASI environment
		if err != nil {
			proxywasm.LogCriticalf("tokentriage: %v", err)
			return types.OnPluginStartStatusFailed
		}
		h.Caller = &callout{cluster: a.Cluster, authority: a.Authority, token: token}
	}
	e, err := NewEngine(cfg, h)
	if err != nil {
		proxywasm.LogCriticalf("tokentriage: %v", err)
		return types.OnPluginStartStatusFailed
	}
	p.engine = e
	if err := proxywasm.SetTickPeriodMilliSeconds(uint32(e.TickPeriod().Milliseconds())); err != nil {
		proxywasm.LogCriticalf("tokentriage: setting the tick period: %v", err)
		return types.OnPluginStartStatusFailed
	}
	return types.OnPluginStartStatusOK
}

func (p *pluginContext) OnTick() {
	if p.engine != nil {
		p.engine.Tick()
		p.releaseStalled()
	}
}

// releaseStalled lets go the held requests that no body has reached for
// HoldGrace (see hold.go): on the stream, from the root context.
func (p *pluginContext) releaseStalled() {
	if len(p.held) == 0 {
		return
	}
	now := time.Now()
	for id, h := range p.held {
		if now.Sub(h.since) < HoldGrace {
			continue
		}
		delete(p.held, id)
		if h.c.s == nil || !h.c.s.Holding() {
			continue
		}
		if err := proxywasm.SetEffectiveContext(id); err != nil {
			continue // the stream is gone
		}
		h.c.apply(p.engine.ReleaseStalled(h.c.s))
		if err := proxywasm.ResumeHttpRequest(); err != nil {
			proxywasm.LogErrorf("tokentriage: resuming a held request: %v", err)
		}
	}
}

// OnPluginDone: the host is ending the VM. Ledger rows still queued go to
// the accountant first; the host waits for proxywasm.PluginDone.
func (p *pluginContext) OnPluginDone() bool {
	if p.engine == nil {
		return true
	}
	return p.engine.Finish(proxywasm.PluginDone)
}

func (p *pluginContext) Add(m Metric, n uint64) { p.counter[m].Increment(n) }

// maxRefusalStats bounds the counters a VM defines by limit: a plan has
// far fewer limits; past it, refusals count under limit_id "other".
const maxRefusalStats = 512

func (p *pluginContext) Refused(limitID, limitType string) {
	name := RefusalStat(limitID, limitType)
	c, ok := p.refusals[name]
	if !ok {
		if p.refusals == nil {
			p.refusals = map[string]proxywasm.MetricCounter{}
		}
		if len(p.refusals) >= maxRefusalStats {
			name = RefusalStat("other", limitType)
			if c, ok = p.refusals[name]; !ok {
				c = proxywasm.DefineCounterMetric(name)
				p.refusals[name] = c
			}
		} else {
			c = proxywasm.DefineCounterMetric(name)
			p.refusals[name] = c
		}
	}
	c.Increment(1)
}

func (p *pluginContext) Set(g Gauge, v int64) {
	switch g {
	case GaugeSyncAge:
		// The same in every VM: the last to set it is right.
		if v != p.gaugeLast[g] {
			p.gauges[g].Set(v)
		}
	default:
		// Each VM's share: add the change, so the stat sums the VMs.
		p.gauges[g].Add(v - p.gaugeLast[g])
	}
	p.gaugeLast[g] = v
}

func (p *pluginContext) NewHttpContext(id uint32) types.HttpContext {
	if p.engine == nil {
		return nil
	}
	c := &httpContext{e: p.engine, s: p.engine.NewStream(), p: p, id: id}
	c.s.SetWaker(c)
	return c
}

// upstreamName is Host.Upstream: Envoy's upstream.address, else the
// route's cluster.
func upstreamName() string {
	if b, err := proxywasm.GetProperty([]string{"upstream", "address"}); err == nil && len(b) > 0 {
		return string(b)
	}
	if b, err := proxywasm.GetProperty([]string{"xds", "cluster_name"}); err == nil && len(b) > 0 {
		return "cluster " + string(b)
	}
	return ""
}

func hostLog(level LogLevel, msg string) {
	switch level {
	case LogDebug:
		proxywasm.LogDebug(msg)
	case LogInfo:
		proxywasm.LogInfo(msg)
	case LogWarn:
		proxywasm.LogWarn(msg)
	default:
		proxywasm.LogError(msg)
	}
}

// httpContext carries one request through the engine.
type httpContext struct {
	types.DefaultHttpContext
	e        *Engine
	s        *Stream
	p        *pluginContext
	id       uint32
	wantBody bool
	head     RequestHead
}

var (
	_ types.HttpContext = (*httpContext)(nil)
	_ BodySource        = (*httpContext)(nil)
)

func (c *httpContext) OnHttpRequestHeaders(_ int, eos bool) types.Action {
	if c.s == nil {
		return types.ActionContinue
	}
	hdrs, err := proxywasm.GetHttpRequestHeaders()
	if err != nil {
		proxywasm.LogErrorf("tokentriage: reading request headers: %v", err)
	}
	c.head = RequestHead{EndOfStream: eos, ContentLength: -1}
	customerName, tagsName := c.e.AttributeHeaders()
	for _, kv := range hdrs {
		switch kv[0] {
		case customerName:
			if c.head.HasCustomer && c.head.Customer != kv[1] {
				c.head.AttributesRepeated = true
			}
			c.head.Customer, c.head.HasCustomer = kv[1], true
			continue
		case tagsName:
			if c.head.HasTags && c.head.Tags != kv[1] {
				c.head.AttributesRepeated = true
			}
			c.head.Tags, c.head.HasTags = kv[1], true
			continue
		}
		switch kv[0] {
		case ":method":
			c.head.Method = kv[1]
		case ":path":
			c.head.Path = kv[1]
		case ":authority":
			c.head.Authority = kv[1]
		case "authorization":
			if c.head.Authorization != "" && c.head.Authorization != kv[1] {
				c.head.Ambiguous = true
			}
			c.head.Authorization = kv[1]
		case "x-api-key":
			if c.head.APIKey != "" && c.head.APIKey != kv[1] {
				c.head.Ambiguous = true
			}
			c.head.APIKey = kv[1]
		case "content-encoding":
			c.head.ContentEncoding = kv[1]
		case "x-http-method-override", "x-http-method", "x-method-override":
			c.head.MethodOverride = kv[1]
		case wire.HeaderModel, wire.HeaderProvider:
			c.head.RoutingHeaders = true
		case "anthropic-version":
			c.head.AnthropicVersion = true
		case "content-length":
			if n, err := strconv.ParseInt(kv[1], 10, 64); err == nil && n >= 0 {
				c.head.ContentLength = n
			}
		}
	}
	if c.e.NeedsRoute() {
		if b, err := proxywasm.GetProperty([]string{"xds", "route_name"}); err == nil {
			c.head.Route = string(b)
		}
	}
	a := c.apply(c.e.RequestHeaders(c.s, &c.head))
	c.watchHold(a)
	return a
}

// watchHold notes a request left paused with its headers held, for
// releaseStalled.
func (c *httpContext) watchHold(a types.Action) {
	if a != types.ActionPause || !c.s.Holding() || c.s.bodyIn != bodyInNone || c.s.bodySize > 0 {
		return
	}
	if _, ok := c.p.held[c.id]; ok {
		return
	}
	if c.p.held == nil {
		c.p.held = map[uint32]heldRequest{}
	}
	c.p.held[c.id] = heldRequest{c: c, since: time.Now()}
}

func (c *httpContext) OnHttpRequestBody(size int, eos bool) types.Action {
	delete(c.p.held, c.id)
	if c.s == nil || !c.s.governs || c.s.replied {
		return types.ActionContinue
	}
	return c.apply(c.e.RequestBody(c.s, size, eos, c))
}

func (c *httpContext) OnHttpRequestTrailers(int) types.Action {
	delete(c.p.held, c.id)
	if c.s == nil || !c.s.governs || c.s.replied {
		return types.ActionContinue
	}
	return c.apply(c.e.RequestTrailers(c.s, c))
}

// Body reads the buffered request body (BodySource), into the engine's
// chunk buffer: gate 2 keeps nothing of it past the callback.
func (c *httpContext) Body(n int) []byte {
	b, err := proxywasm.GetHttpRequestBodyInto(0, n, c.e.chunk[:0])
	if err != nil {
		proxywasm.LogErrorf("tokentriage: reading the request body: %v", err)
	}
	c.e.keepChunk(b)
	return b
}

// apply carries out a verdict on the request: its header edits one host
// call each (a rewrite of the whole map would hand the host a map it may
// not hold, which Envoy answers by emptying it), its body, and its action.
// A request whose edits fail is answered by the filter, never sent on half
// edited: with the virtual key still in it, or a length that no longer
// matches its body.
func (c *httpContext) apply(v Verdict) types.Action {
	if v.Action != ActReply {
		for _, h := range v.RemoveHeaders {
			if err := proxywasm.RemoveHttpRequestHeader(h); err != nil {
				return c.apply(c.e.EditFailed(c.s, "removing its "+h+" header", err))
			}
		}
		for _, h := range v.SetHeaders {
			if err := proxywasm.ReplaceHttpRequestHeader(h[0], h[1]); err != nil {
				return c.apply(c.e.EditFailed(c.s, "setting its "+h[0]+" header", err))
			}
		}
		if v.Body != nil {
			if err := proxywasm.ReplaceHttpRequestBody(v.Body); err != nil {
				return c.apply(c.e.EditFailed(c.s, "rewriting its body", err))
			}
		}
		if v.Length > 0 {
			if err := proxywasm.ReplaceHttpRequestHeader("content-length", strconv.FormatInt(v.Length, 10)); err != nil {
				if err := proxywasm.RemoveHttpRequestHeader("content-length"); err != nil {
					return c.apply(c.e.EditFailed(c.s, "removing its content-length header", err))
				}
			}
		}
		for _, h := range v.RouteHeaders {
			if err := proxywasm.ReplaceHttpRequestHeader(h[0], h[1]); err != nil {
				proxywasm.LogWarnf("tokentriage: setting the %s header: %v (routes matching it will not see it)", h[0], err)
			}
		}
		if v.ClearRoute {
			// Envoy chose the route before this filter ran; without its
			// clear_route_cache (a host that lacks it) the edits route
			// nothing.
			proxywasm.ClearRouteCache()
		}
	}
	switch v.Action {
	case ActPause:
		return types.ActionPause
	case ActReply:
		r := v.Reply
		if err := proxywasm.SendHttpResponse(uint32(r.Status), r.Headers, r.Body, -1); err != nil {
			proxywasm.LogErrorf("tokentriage: sending the local reply: %v", err)
		}
		return types.ActionPause
	}
	return types.ActionContinue
}

// Wake carries out a verdict the engine reached on the answer to a
// callout the request was waiting for (paused): a local reply, or the
// request going on. It runs as the request's context (the binding makes
// it the effective context for the answer).
func (c *httpContext) Wake(v Verdict) {
	if c.s == nil {
		return // gone
	}
	// The answer may be another request's (a lease call answered on the
	// plugin context serves every request that waited on it): this one's
	// host calls act on it.
	if err := proxywasm.SetEffectiveContext(c.id); err != nil {
		return // the stream is gone
	}
	if v.Action != ActReply && c.s.bodyIn != bodyInNone {
		// The body came in while gate 1 waited (a host that delivers it
		// to a filter paused at the headers): gate 1's edits, then gate 2.
		v.Action = ActPause
		if c.apply(v); c.s.replied {
			return
		}
		v = c.e.BodyAfterWait(c.s, c)
	}
	a := c.apply(v)
	if a == types.ActionContinue {
		if err := proxywasm.ResumeHttpRequest(); err != nil {
			proxywasm.LogErrorf("tokentriage: resuming the request: %v", err)
		}
		return
	}
	c.watchHold(a)
}

func (c *httpContext) OnHttpResponseHeaders(_ int, eos bool) types.Action {
	if c.s == nil {
		return types.ActionContinue // settled already; nothing comes after that
	}
	status, contentType, contentEncoding := 0, "", ""
	hdrs, err := proxywasm.GetHttpResponseHeaders()
	if err == nil {
		for _, kv := range hdrs {
			switch kv[0] {
			case ":status":
				status, _ = strconv.Atoi(kv[1])
			case "content-type":
				contentType = kv[1]
			case "content-encoding":
				contentEncoding = kv[1]
			}
		}
	}
	rh := c.e.ResponseHeaders(c.s, status, contentType, contentEncoding)
	rewritten := false
	if edits := len(rh.Add); edits >= 2 && err == nil {
		// One host call instead of one per header: the map as it was
		// (less content-length when the body may change), then ours. A
		// map the pair format cannot carry is refused by the binding
		// before it reaches the host, and edited one header at a time.
		all := c.e.pairs[:0]
		for _, kv := range hdrs {
			if !rh.RemoveContentLength || kv[0] != "content-length" {
				all = append(all, kv)
			}
		}
		all = append(all, rh.Add...)
		c.e.pairs = all[:0]
		rewritten = proxywasm.ReplaceHttpResponseHeaders(all) == nil
	}
	if !rewritten {
		for _, h := range rh.Add {
			_ = proxywasm.AddHttpResponseHeader(h[0], h[1])
		}
		if rh.RemoveContentLength {
			_ = proxywasm.RemoveHttpResponseHeader("content-length")
		}
	}
	c.wantBody = rh.WantBody
	if eos {
		c.s.respDone = true
	}
	return types.ActionContinue
}

func (c *httpContext) OnHttpResponseBody(size int, eos bool) types.Action {
	if c.s == nil {
		return types.ActionContinue
	}
	if !c.wantBody {
		if eos {
			c.s.respDone = true
		}
		return types.ActionContinue
	}
	if c.s.HoldsResponseBody() && !eos {
		return types.ActionPause // the host buffers it: the next call sees it all
	}
	var chunk []byte
	if size > 0 {
		var err error
		if chunk, err = proxywasm.GetHttpResponseBodyInto(0, size, c.e.chunk[:0]); err != nil {
			proxywasm.LogErrorf("tokentriage: reading the response body: %v", err)
		}
		c.e.keepChunk(chunk)
	}
	if out, changed := c.e.ResponseBody(c.s, chunk, eos); changed {
		if err := proxywasm.ReplaceHttpResponseBody(out); err != nil {
			proxywasm.LogErrorf("tokentriage: rewriting the response body: %v", err)
		}
	}
	return types.ActionContinue
}

// OnHttpStreamDone settles the request. The binding calls it exactly once
// per HTTP context, and nothing after it, so the stream goes back to the
// engine's pool here.
func (c *httpContext) OnHttpStreamDone() {
	delete(c.p.held, c.id)
	if c.s == nil {
		return
	}
	c.e.Done(c.s)
	c.e.Release(c.s)
	c.s = nil
}

// sharedData is Store over the host's shared data. Values come back in one
// buffer of its own, reused from get to get (the VM is single-threaded and
// every caller reads a value before its next get), so reading a cell does
// not allocate.
type sharedData struct{ buf []byte }

var _ Store = (*sharedData)(nil)

func (d *sharedData) Get(key string) ([]byte, uint32, bool, error) {
	v, cas, err := proxywasm.GetSharedDataInto(key, d.buf[:0])
	if cap(v) > cap(d.buf) && cap(v) <= maxSharedScratch {
		d.buf = v[:0] // grow to the largest small value seen
	}
	switch {
	case err == nil:
		return v, cas, true, nil
	case errors.Is(err, types.ErrorStatusNotFound):
		return nil, 0, false, nil
	}
	return nil, 0, false, err
}

// maxSharedScratch bounds the buffer sharedData keeps: cells are a few
// dozen bytes; large values (the synced parts) get their own.
const maxSharedScratch = 4096

func (*sharedData) Set(key string, value []byte, cas uint32) (bool, error) {
	err := proxywasm.SetSharedData(key, value, cas)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, types.ErrorStatusCasMismatch):
		return false, nil
	}
	return false, err
}

// callout is Caller over proxy_http_call to the accountant cluster.
type callout struct {
	cluster, authority, token string
}

var _ PluginCaller = (*callout)(nil)

func (c *callout) Call(method, path string, headers [][2]string, body []byte, timeout time.Duration, cb func(int, []byte)) error {
	return c.call(method, path, headers, body, timeout, cb, proxywasm.DispatchHttpCall)
}

// CallForPlugin is Call whose answer runs on the plugin context.
func (c *callout) CallForPlugin(method, path string, headers [][2]string, body []byte, timeout time.Duration, cb func(int, []byte)) error {
	return c.call(method, path, headers, body, timeout, cb, proxywasm.DispatchHttpCallForPlugin)
}

type dispatcher func(cluster string, headers [][2]string, body []byte, trailers [][2]string,
	timeoutMillisecond uint32, cb func(numHeaders, bodySize, numTrailers int)) (uint32, error)

func (c *callout) call(method, path string, headers [][2]string, body []byte, timeout time.Duration, cb func(int, []byte), dispatch dispatcher) error {
	authority := c.authority
	if authority == "" {
		authority = c.cluster
	}
	hdrs := make([][2]string, 0, 4+len(headers))
	hdrs = append(hdrs, [2]string{":method", method}, [2]string{":path", path}, [2]string{":authority", authority})
	if c.token != "" {
		hdrs = append(hdrs, [2]string{"authorization", "Bearer " + c.token})
	}
	hdrs = append(hdrs, headers...)
	_, err := dispatch(c.cluster, hdrs, body, nil, uint32(timeout.Milliseconds()), func(numHeaders, bodySize, _ int) {
		if numHeaders == 0 {
			cb(0, nil)
			return
		}
		status := 0
		if hs, err := proxywasm.GetHttpCallResponseHeaders(); err == nil {
			for _, kv := range hs {
				if kv[0] == ":status" {
					status, _ = strconv.Atoi(kv[1])
				}
			}
		}
		var b []byte
		if bodySize > 0 {
			b, _ = proxywasm.GetHttpCallResponseBody(0, bodySize)
		}
		cb(status, b)
	})
	return err
}
