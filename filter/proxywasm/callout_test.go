package proxywasm_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokentriage/tokentriage/filter/proxywasm"
	"github.com/tokentriage/tokentriage/filter/proxywasm/proxytest"
)

var calloutHeaders = [][2]string{{":method", "POST"}, {":path", "/tt/internal/v1/ingest"}, {":authority", "accountant"}}

// The classic pause-call-resume: the callback runs as the calling stream,
// so it can read the callout response and resume that stream.
func TestCalloutPauseAndResume(t *testing.T) {
	var got struct {
		n, size, trailers int
		headers           [][2]string
		body              []byte
		reqPath           string
	}
	h := &hooks{reqHeaders: func(uint32, int, bool) types.Action {
		_, err := proxywasm.DispatchHttpCall("accountant", calloutHeaders, []byte(`{"rows":[]}`), nil, 5000,
			func(n, size, trailers int) {
				got.n, got.size, got.trailers = n, size, trailers
				got.headers, _ = proxywasm.GetHttpCallResponseHeaders()
				got.body, _ = proxywasm.GetHttpCallResponseBody(0, size)
				got.reqPath, _ = proxywasm.GetHttpRequestHeader(":path") // still paused: readable
				mustOK(t, proxywasm.AddHttpRequestHeader("x-checked", "yes"))
				mustOK(t, proxywasm.ResumeHttpRequest())
			})
		mustOK(t, err)
		return types.ActionPause
	}}
	e := start(t, h, proxytest.Options{Clusters: []string{"accountant"}})
	id := e.InitializeHttpContext()
	if act := e.CallOnRequestHeaders(id, requestHeaders, false); act != types.ActionPause {
		t.Fatalf("action = %v, want Pause", act)
	}
	// Body arriving while the headers are paused is held for the filter.
	if act := e.CallOnRequestBody(id, []byte("{}"), true); act != types.ActionPause {
		t.Fatalf("held body action = %v", act)
	}
	calls := e.GetPendingHttpCalls()
	if len(calls) != 1 {
		t.Fatalf("pending callouts = %+v", calls)
	}
	c := calls[0]
	wantHeaders := append(slices.Clone(calloutHeaders), [2]string{"content-length", "11"})
	if c.Upstream != "accountant" || c.Timeout != 5000 || string(c.Body) != `{"rows":[]}` || !slices.Equal(c.Headers, wantHeaders) {
		t.Fatalf("callout = %+v", c)
	}
	mustOK(t, e.CallOnHttpCallResponse(c.CalloutID, [][2]string{{":status", "200"}, {"x-v", "1"}}, nil, []byte("ok")))
	if got.n != 2 || got.size != 2 || got.trailers != 0 || string(got.body) != "ok" ||
		!slices.Equal(got.headers, [][2]string{{":status", "200"}, {"x-v", "1"}}) || got.reqPath != "/v1/chat/completions?x=1" {
		t.Fatalf("callback saw %+v", got)
	}
	if act := e.GetCurrentHttpStreamAction(id); act != types.ActionContinue {
		t.Errorf("after ResumeHttpRequest the stream action = %v", act)
	}
	if !slices.Contains(e.GetCurrentRequestHeaders(id), [2]string{"x-checked", "yes"}) {
		t.Errorf("header added in the callback is missing: %q", e.GetCurrentRequestHeaders(id))
	}
	if body := e.GetCurrentRequestBody(id); string(body) != "{}" {
		t.Errorf("held body after resume = %q", body)
	}
	if err := e.CallOnHttpCallResponse(c.CalloutID, nil, nil, nil); err == nil {
		t.Error("answering a callout twice must fail")
	}
}

func TestCalloutFailureAndTimeout(t *testing.T) {
	type result struct {
		n      int
		code   uint32
		msg    string
		status string
	}
	var results []result
	h := &hooks{tick: func() {
		for range 2 {
			_, err := proxywasm.DispatchHttpCall("accountant", calloutHeaders, nil, nil, 100, func(n, _, _ int) {
				code, msg, _ := proxywasm.GetStatus()
				st := ""
				if n > 0 {
					st, _ = getCallStatus()
				}
				results = append(results, result{n, code, msg, st})
			})
			mustOK(t, err)
		}
	}, pluginStart: func(int) bool { return proxywasm.SetTickPeriodMilliSeconds(1000) == nil }}
	e := start(t, h, proxytest.Options{})
	e.Tick()
	calls := e.GetPendingHttpCalls()
	if len(calls) != 2 || calls[0].CalloutID != 4 || calls[1].CalloutID != 8 {
		t.Fatalf("callouts = %+v, want ids 4 and 8", calls)
	}
	mustOK(t, e.FailHttpCall(calls[0].CalloutID))
	mustOK(t, e.TimeoutHttpCall(calls[1].CalloutID))
	want := []result{{0, 11, "reset", ""}, {3, 0, "", "504"}}
	if !slices.Equal(results, want) {
		t.Fatalf("results = %+v, want %+v", results, want)
	}
}

func getCallStatus() (string, error) {
	hs, err := proxywasm.GetHttpCallResponseHeaders()
	for _, h := range hs {
		if h[0] == ":status" {
			return h[1], nil
		}
	}
	return "", err
}

func TestCalloutRejected(t *testing.T) {
	var errs []error
	h := &hooks{reqHeaders: func(uint32, int, bool) types.Action {
		_, err := proxywasm.DispatchHttpCall("accountant", [][2]string{{":method", "GET"}, {":path", "/"}}, nil, nil, 0, nil)
		errs = append(errs, err) // no :authority
		_, err = proxywasm.DispatchHttpCall("nowhere", calloutHeaders, nil, nil, 0, nil)
		errs = append(errs, err) // unknown cluster
		return types.ActionContinue
	}}
	e := start(t, h, proxytest.Options{Clusters: []string{"accountant"}})
	e.CallOnRequestHeaders(e.InitializeHttpContext(), requestHeaders, true)
	for i, err := range errs {
		if !errors.Is(err, types.ErrorStatusBadArgument) {
			t.Errorf("case %d: err = %v, want BadArgument", i, err)
		}
	}
	if n := len(e.GetPendingHttpCalls()); n != 0 {
		t.Errorf("%d callouts pending, want none", n)
	}
}

// A response for a stream that is gone must not run the callback (and
// must not panic).
func TestCalloutForAGoneStream(t *testing.T) {
	ran := false
	h := &hooks{reqHeaders: func(uint32, int, bool) types.Action {
		proxywasm.DispatchHttpCall("accountant", calloutHeaders, nil, nil, 0, func(int, int, int) { ran = true })
		return types.ActionPause
	}}
	e := start(t, h, proxytest.Options{})
	id := e.InitializeHttpContext()
	e.CallOnRequestHeaders(id, requestHeaders, true)
	e.CompleteHttpContext(id) // the client went away
	calls := e.GetPendingHttpCalls()
	if len(calls) != 1 {
		t.Fatalf("callouts = %+v", calls)
	}
	mustOK(t, e.CallOnHttpCallResponse(calls[0].CalloutID, nil, nil, []byte("late")))
	if ran {
		t.Fatal("the callback ran for a deleted stream")
	}
}

func TestTickPeriodAndTick(t *testing.T) {
	ticks := 0
	h := &hooks{
		pluginStart: func(int) bool { return proxywasm.SetTickPeriodMilliSeconds(5000) == nil },
		tick:        func() { ticks++ },
	}
	e := start(t, h, proxytest.Options{})
	if p := e.GetTickPeriod(); p != 5000 {
		t.Fatalf("tick period = %d", p)
	}
	for range 3 {
		if !e.Tick() {
			t.Fatal("Tick did not fire")
		}
	}
	if ticks != 3 {
		t.Fatalf("OnTick ran %d times, want 3", ticks)
	}
	quiet := start(t, &hooks{tick: func() { t.Error("OnTick without a tick period") }}, proxytest.Options{})
	if quiet.Tick() {
		t.Error("Tick fired with no period set")
	}
}

func TestMetricsAcrossVMs(t *testing.T) {
	type ms struct {
		c proxywasm.MetricCounter
		g proxywasm.MetricGauge
		h proxywasm.MetricHistogram
	}
	var calls uint64
	newHooks := func(m *ms) *hooks {
		return &hooks{
			pluginStart: func(int) bool {
				m.c = proxywasm.DefineCounterMetric("tt_admitted")
				m.g = proxywasm.DefineGaugeMetric("tt_inflight")
				m.h = proxywasm.DefineHistogramMetric("tt_latency_ms")
				return m.c.Defined() && m.g.Defined() && m.h.Defined()
			},
			reqHeaders: func(uint32, int, bool) types.Action {
				m.c.Increment(1)
				m.g.Add(2)
				m.g.Add(-1)
				m.h.Record(12)
				c0 := proxywasm.HostCalls()
				m.c.Increment(0) // no host call: Envoy rejects 0
				m.g.Add(0)
				calls += proxywasm.HostCalls() - c0
				return types.ActionContinue
			},
		}
	}
	// Each VM gets its own VM context (and metric ids), as wasm VMs do.
	e1 := proxytest.NewEmulator(proxytest.Options{NewVMContext: func() types.VMContext {
		return hookVM{h: newHooks(&ms{})}
	}})
	for _, e := range []*proxytest.Emulator{e1, e1.NewVM()} {
		if e.StartPlugin() != types.OnPluginStartStatusOK {
			t.Fatal("StartPlugin failed")
		}
		e.CallOnRequestHeaders(e.InitializeHttpContext(), requestHeaders, true)
	}
	if c, err := e1.GetCounterMetric("tt_admitted"); err != nil || c != 2 {
		t.Errorf("counter = %d, %v; want 2 (one stat for every VM)", c, err)
	}
	if g, err := e1.GetGaugeMetric("tt_inflight"); err != nil || g != 2 {
		t.Errorf("gauge = %d, %v; want 2", g, err)
	}
	if h, err := e1.GetHistogramMetric("tt_latency_ms"); err != nil || !slices.Equal(h, []uint64{12, 12}) {
		t.Errorf("histogram = %v, %v", h, err)
	}
	if calls != 0 {
		t.Errorf("zero increments made %d host calls", calls)
	}
	if _, err := e1.GetCounterMetric("nope"); err == nil {
		t.Error("an undefined metric must be an error")
	}
}

func TestMetricValues(t *testing.T) {
	var cv uint64
	var gv int64
	h := &hooks{reqHeaders: func(uint32, int, bool) types.Action {
		c := proxywasm.DefineCounterMetric("c")
		g := proxywasm.DefineGaugeMetric("g")
		c.Increment(5)
		g.Set(40)
		g.Add(-50)
		cv, gv = c.Value(), g.Value()
		return types.ActionContinue
	}}
	e := start(t, h, proxytest.Options{})
	e.CallOnRequestHeaders(e.InitializeHttpContext(), requestHeaders, true)
	if cv != 5 || gv != -10 {
		t.Fatalf("counter %d, gauge %d; want 5, -10", cv, gv)
	}
}

func TestProperties(t *testing.T) {
	var id, name, node, url []byte
	var setErr, emptyErr, rootErr error
	var back []byte
	h := &hooks{
		pluginStart: func(int) bool {
			name, _ = proxywasm.GetProperty([]string{"plugin_name"})
			rootErr = proxywasm.SetProperty([]string{"x"}, []byte("y"))
			return true
		},
		reqHeaders: func(uint32, int, bool) types.Action {
			id, _ = proxywasm.GetProperty([]string{"request", "id"})
			node, _ = proxywasm.GetProperty([]string{"xds", "node", "id"})
			url, _ = proxywasm.GetProperty([]string{"request", "url_path"})
			setErr = proxywasm.SetProperty([]string{"tt_request_id"}, []byte("tt_1"))
			back, _ = proxywasm.GetProperty([]string{"tt_request_id"})
			_, emptyErr = proxywasm.GetProperty(nil)
			return types.ActionContinue
		},
	}
	e := start(t, h, proxytest.Options{PluginName: "tokentriage", Properties: map[string][]byte{"xds.node.id": []byte("node-a")}})
	e.CallOnRequestHeaders(e.InitializeHttpContext(), requestHeaders, true)
	if string(id) != "rid-1" || string(name) != "tokentriage" || string(node) != "node-a" || string(url) != "/v1/chat/completions" {
		t.Errorf("properties: id %q, plugin_name %q, node %q, url_path %q", id, name, node, url)
	}
	if setErr != nil || string(back) != "tt_1" {
		t.Errorf("SetProperty round trip: %v, %q", setErr, back)
	}
	if !errors.Is(rootErr, types.ErrorStatusNotFound) {
		t.Errorf("SetProperty on the root context: %v, want NotFound", rootErr)
	}
	if emptyErr == nil {
		t.Error("an empty property path must be an error")
	}
}

func TestConfiguration(t *testing.T) {
	var plugin, vm []byte
	var lateErr error
	h := &hooks{
		vmStart: func(size int) bool {
			vm, _ = proxywasm.GetVMConfiguration()
			return size == 2
		},
		pluginStart: func(size int) bool {
			plugin, _ = proxywasm.GetPluginConfiguration()
			return size == len(`{"accountant":"acct"}`)
		},
		reqHeaders: func(uint32, int, bool) types.Action {
			_, lateErr = proxywasm.GetPluginConfiguration()
			return types.ActionContinue
		},
	}
	e := start(t, h, proxytest.Options{PluginConfiguration: []byte(`{"accountant":"acct"}`), VMConfiguration: []byte("vm")})
	e.CallOnRequestHeaders(e.InitializeHttpContext(), requestHeaders, true)
	if string(plugin) != `{"accountant":"acct"}` || string(vm) != "vm" {
		t.Errorf("plugin %q, vm %q", plugin, vm)
	}
	if !errors.Is(lateErr, types.ErrorStatusNotFound) {
		t.Errorf("plugin configuration outside OnPluginStart: %v, want NotFound", lateErr)
	}
}

func TestLogsAndLevel(t *testing.T) {
	var level proxywasm.LogLevel
	h := &hooks{reqHeaders: func(uint32, int, bool) types.Action {
		level, _ = proxywasm.GetLogLevel()
		proxywasm.LogDebug("hidden")
		proxywasm.LogInfof("admitted %d", 3)
		proxywasm.LogWarn("w")
		return types.ActionContinue
	}}
	e := start(t, h, proxytest.Options{LogLevel: proxywasm.LogLevelInfo})
	e.CallOnRequestHeaders(e.InitializeHttpContext(), requestHeaders, true)
	if level != proxywasm.LogLevelInfo {
		t.Errorf("GetLogLevel = %v", level)
	}
	if d := e.GetDebugLogs(); len(d) != 0 {
		t.Errorf("debug logs below the level were kept: %q", d)
	}
	if i := e.GetInfoLogs(); !slices.Equal(i, []string{"admitted 3"}) {
		t.Errorf("info logs = %q", i)
	}
	if w := e.GetWarnLogs(); !slices.Equal(w, []string{"w"}) {
		t.Errorf("warn logs = %q", w)
	}
}

// OnPluginDone false defers the root's deletion until PluginDone.
func TestPluginDoneLater(t *testing.T) {
	deleted := false
	h := &hooks{
		pluginStart: func(int) bool { return proxywasm.SetTickPeriodMilliSeconds(10) == nil },
		pluginDone:  func() bool { return false },
		tick: func() {
			proxywasm.PluginDone()
			deleted = true
		},
	}
	e := start(t, h, proxytest.Options{})
	if e.FinishVM() {
		t.Fatal("FinishVM = true, want false (the plugin asked to finish later)")
	}
	if !e.Tick() || !deleted {
		t.Fatal("the pending root must still tick")
	}
	if e.Tick() {
		t.Error("the root still ticks after PluginDone deleted it")
	}
}

// A host may number metrics from 0 (the upstream SDK's test host does):
// the first metric defined must count like any other.
func TestMetricIDZero(t *testing.T) {
	var c proxywasm.MetricCounter
	var g proxywasm.MetricGauge
	var defined bool
	var cv uint64
	h := &hooks{
		pluginStart: func(int) bool {
			c = proxywasm.DefineCounterMetric("first")
			g = proxywasm.DefineGaugeMetric("second")
			defined = c.Defined() && g.Defined()
			return true
		},
		reqHeaders: func(uint32, int, bool) types.Action {
			c.Increment(3)
			g.Set(7)
			cv = c.Value()
			return types.ActionContinue
		},
	}
	e := start(t, h, proxytest.Options{SequentialMetricIDs: true})
	e.CallOnRequestHeaders(e.InitializeHttpContext(), requestHeaders, true)
	if !defined {
		t.Error("a metric given id 0 reports itself undefined")
	}
	if v, err := e.GetCounterMetric("first"); err != nil || v != 3 || cv != 3 {
		t.Errorf("counter with id 0 = %d (read back %d), %v; want 3", v, cv, err)
	}
	if v, err := e.GetGaugeMetric("second"); err != nil || v != 7 {
		t.Errorf("gauge = %d, %v; want 7", v, err)
	}
	// A metric whose definition failed stays inert: no host call at all.
	var bad proxywasm.MetricCounter
	c0 := proxywasm.HostCalls()
	bad.Increment(1)
	if bad.Defined() || bad.Value() != 0 || proxywasm.HostCalls() != c0 {
		t.Error("the zero MetricCounter is not inert")
	}
}

// The native stand-in reads Options.Properties at the paths wasmtest reads
// Config.Properties at: a segment that holds dots (a filter name in route
// metadata) is one segment, and xds.* answers at its older top-level
// spelling too.
func TestPropertyPathsAgreeWithWasmtest(t *testing.T) {
	got := map[string]string{}
	read := func(path ...string) {
		v, err := proxywasm.GetProperty(path)
		if err != nil {
			got[strings.Join(path, "|")] = "error: " + err.Error()
			return
		}
		got[strings.Join(path, "|")] = string(v)
	}
	h := &hooks{reqHeaders: func(uint32, int, bool) types.Action {
		read("xds", "route_metadata", "filter_metadata", "envoy.filters.http.wasm", "backend")
		read("route_metadata", "filter_metadata", "envoy.filters.http.wasm", "backend")
		read("xds", "route_metadata", "filter_metadata", "envoy", "filters", "http", "wasm", "backend")
		read("xds", "route_name")
		read("route_name")
		return types.ActionContinue
	}}
	e := start(t, h, proxytest.Options{Properties: map[string][]byte{
		"xds.route_metadata.filter_metadata['envoy.filters.http.wasm'].backend": []byte("pool-a"),
		"xds.route_name": []byte("llm"),
	}})
	e.CallOnRequestHeaders(e.InitializeHttpContext(), requestHeaders, true)
	want := map[string]string{
		"xds|route_metadata|filter_metadata|envoy.filters.http.wasm|backend": "pool-a",
		"route_metadata|filter_metadata|envoy.filters.http.wasm|backend":     "pool-a",
		"xds|route_metadata|filter_metadata|envoy|filters|http|wasm|backend": "error: error status returned by host: not found",
		"xds|route_name": "llm",
		"route_name":     "llm",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
}

// clear_route_cache is the one foreign function the filter calls; the
// stand-in counts it per stream, and answers NOT_FOUND for names it lacks.
func TestForeignFunctionsNative(t *testing.T) {
	var cleared bool
	var unknownErr error
	var z, back []byte
	h := &hooks{reqHeaders: func(uint32, int, bool) types.Action {
		cleared = proxywasm.ClearRouteCache()
		_, unknownErr = proxywasm.CallForeignFunction("no_such_function", nil)
		z, _ = proxywasm.CallForeignFunction("compress", []byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"))
		back, _ = proxywasm.CallForeignFunction("uncompress", z)
		return types.ActionContinue
	}}
	e := start(t, h, proxytest.Options{})
	id := e.InitializeHttpContext()
	e.CallOnRequestHeaders(id, requestHeaders, false)
	if !cleared || e.RouteCacheClears(id) != 1 {
		t.Errorf("ClearRouteCache = %v, clears = %d", cleared, e.RouteCacheClears(id))
	}
	if !errors.Is(unknownErr, types.ErrorStatusNotFound) {
		t.Errorf("unknown function: %v", unknownErr)
	}
	if string(back) != "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" || len(z) == 0 {
		t.Errorf("compress/uncompress round trip: %q", back)
	}
}
