package proxytest

import (
	"slices"
	"testing"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"
)

// newBare returns a started emulator whose plugin makes no HTTP contexts,
// and a stream the test drives the host for directly.
func newBare(t *testing.T) (*Emulator, *stream) {
	t.Helper()
	e := NewEmulator(Options{VMContext: &types.DefaultVMContext{}})
	if e.StartPlugin() != types.OnPluginStartStatusOK {
		t.Fatal("StartPlugin failed")
	}
	id := e.InitializeHttpContext()
	s := e.h.streams[id]
	e.h.effective = id
	return e, s
}

// Envoy's Buffer::copyFrom, case by case (fact sheet 1.7).
func TestSetBufferBytesRules(t *testing.T) {
	tests := []struct {
		body        string
		start, size uint32
		want        string
		status      uint32
	}{
		{"abcd", 0, 0, "Xabcd", abi.StatusOK},       // prepend
		{"abcd", 0, 4, "X", abi.StatusOK},           // replace
		{"abcd", 0, 1 << 31, "X", abi.StatusOK},     // replace (SDK's MaxInt32)
		{"abcd", 4, 0, "abcdX", abi.StatusOK},       // append
		{"abcd", 1 << 30, 0, "abcdX", abi.StatusOK}, // append
		{"abcd", 1, 2, "abcd", abi.StatusBadArgument},
		{"abcd", 0, 3, "abcd", abi.StatusBadArgument},
		{"abcd", 3, 0, "abcd", abi.StatusBadArgument},
		{"", 0, 0, "X", abi.StatusOK},
	}
	for i, tt := range tests {
		e, s := newBare(t)
		s.req.body, s.req.bodyLive = []byte(tt.body), true
		if st := e.h.SetBufferBytes(abi.BufferHttpRequestBody, tt.start, tt.size, []byte("X")); st != tt.status {
			t.Errorf("step %d: status %d, want %d", i, st, tt.status)
		}
		if string(s.req.body) != tt.want {
			t.Errorf("step %d: body %q, want %q", i, s.req.body, tt.want)
		}
	}
}

func TestGetBufferBytesClamps(t *testing.T) {
	e, s := newBare(t)
	if _, st := e.h.GetBufferBytes(abi.BufferHttpRequestBody, 0, 10); st != abi.StatusNotFound {
		t.Errorf("no body yet: status %d, want NOT_FOUND", st)
	}
	s.resp.body, s.resp.bodyLive = []byte("hello"), true
	tests := []struct {
		start, max uint32
		want       string
	}{{0, 100, "hello"}, {1, 3, "ell"}, {4, 100, "o"}, {5, 1, ""}, {1 << 31, 1 << 31, ""}}
	for i, tt := range tests {
		b, st := e.h.GetBufferBytes(abi.BufferHttpResponseBody, tt.start, tt.max)
		if st != abi.StatusOK || string(b) != tt.want {
			t.Errorf("step %d: %q, %d; want %q", i, b, st, tt.want)
		}
	}
	if st := e.h.SetBufferBytes(abi.BufferVMConfiguration, 0, 0, nil); st != abi.StatusBadArgument {
		t.Errorf("writing the VM configuration: status %d, want BAD_ARGUMENT", st)
	}
}

// Envoy's metric rules (fact sheet 3.7).
func TestMetricRules(t *testing.T) {
	e, _ := newBare(t)
	h := e.h
	c, _ := h.DefineMetric(abi.MetricCounter, "c")
	g, _ := h.DefineMetric(abi.MetricGauge, "g")
	hi, _ := h.DefineMetric(abi.MetricHistogram, "h")
	c2, _ := h.DefineMetric(abi.MetricCounter, "c2")
	again, _ := h.DefineMetric(abi.MetricCounter, "c")
	if c != 4 || g != 5 || hi != 6 || c2 != 8 || again != c {
		t.Fatalf("ids = %d %d %d %d %d, want 4 5 6 8 4", c, g, hi, c2, again)
	}
	steps := []struct {
		name string
		st   uint32
		want uint32
	}{
		{"define type 3", second(h.DefineMetric(3, "x")), abi.StatusBadArgument},
		{"counter +0", h.IncrementMetric(c, 0), abi.StatusBadArgument},
		{"counter -1", h.IncrementMetric(c, -1), abi.StatusBadArgument},
		{"counter +2", h.IncrementMetric(c, 2), abi.StatusOK},
		{"counter record 3 adds", h.RecordMetric(c, 3), abi.StatusOK},
		{"gauge -4", h.IncrementMetric(g, -4), abi.StatusOK},
		{"histogram increment", h.IncrementMetric(hi, 1), abi.StatusBadArgument},
		{"histogram record", h.RecordMetric(hi, 9), abi.StatusOK},
		{"histogram get", status64(h.GetMetric(hi)), abi.StatusBadArgument},
		{"unknown counter", h.IncrementMetric(400, 1), abi.StatusNotFound},
		{"unknown get", status64(h.GetMetric(404)), abi.StatusNotFound},
	}
	for _, s := range steps {
		if s.st != s.want {
			t.Errorf("%s: status %d, want %d", s.name, s.st, s.want)
		}
	}
	if v, _ := h.GetMetric(c); v != 5 {
		t.Errorf("counter = %d, want 5", v)
	}
	if v, _ := h.GetMetric(g); int64(v) != -4 {
		t.Errorf("gauge = %d, want -4", int64(v))
	}
}

func second(_, b uint32) uint32 { return b }

func status64(_ uint64, b uint32) uint32 { return b }

func TestHeaderMapRules(t *testing.T) {
	e, s := newBare(t)
	h := e.h
	// Not live: value BAD_ARGUMENT, pairs empty OK, size BAD_ARGUMENT.
	s.req.headers = [][2]string{{"a", "1"}}
	if _, st := h.GetHeaderMapValue(abi.MapHttpRequestHeaders, "a"); st != abi.StatusBadArgument {
		t.Errorf("value of a dropped map: %d", st)
	}
	if b, st := h.GetHeaderMapPairs(abi.MapHttpRequestHeaders); st != abi.StatusOK || b != nil {
		t.Errorf("pairs of a dropped map: %v, %d", b, st)
	}
	if _, st := h.GetHeaderMapSize(abi.MapHttpRequestHeaders); st != abi.StatusBadArgument {
		t.Errorf("size of a dropped map: %d", st)
	}
	s.req.headersLive = true
	if n, st := h.GetHeaderMapSize(abi.MapHttpRequestHeaders); st != abi.StatusOK || n != 2 {
		t.Errorf("size = %d, %d; want Envoy's byteSize 2", n, st)
	}
	h.ReplaceHeaderMapValue(abi.MapHttpRequestHeaders, "B", "x")
	h.AddHeaderMapValue(abi.MapHttpRequestHeaders, "b", "y")
	h.ReplaceHeaderMapValue(abi.MapHttpRequestHeaders, "b", "z")
	if want := [][2]string{{"a", "1"}, {"b", "z"}}; !slices.Equal(s.req.headers, want) {
		t.Errorf("headers = %q, want %q", s.req.headers, want)
	}
	// Malformed pairs are an empty map, as cpp-host decodes them.
	h.SetHeaderMapPairs(abi.MapHttpRequestHeaders, []byte{1, 2, 3})
	if len(s.req.headers) != 0 {
		t.Errorf("malformed pairs left %q", s.req.headers)
	}
	// A body callback at end of stream may add trailers.
	s.req.inBody, s.req.eos = true, true
	if st := h.AddHeaderMapValue(abi.MapHttpRequestTrailers, "t", "1"); st != abi.StatusOK {
		t.Errorf("adding trailers at end of stream: %d", st)
	}
	s.req.inBody = false
	// The call response maps exist only during the callout callback.
	if _, st := h.GetHeaderMapValue(abi.MapHttpCallResponseHeaders, ":status"); st != abi.StatusBadArgument {
		t.Errorf("call response outside its callback: %d", st)
	}
	// The root context has no stream maps.
	h.effective = h.rootID
	if st := h.AddHeaderMapValue(abi.MapHttpRequestHeaders, "x", "y"); st != abi.StatusBadArgument {
		t.Errorf("stream map from the root: %d", st)
	}
	if st := h.SetEffectiveContext(9999); st != abi.StatusBadArgument {
		t.Errorf("SetEffectiveContext(unknown) = %d", st)
	}
}

func TestSharedDataCASCounterWraps(t *testing.T) {
	p := newProcess(Options{})
	p.cas = ^uint32(0)
	p.setShared("a", nil, 0)
	p.setShared("b", nil, 0)
	_, ca, _ := p.getShared("a")
	_, cb, _ := p.getShared("b")
	if ca != ^uint32(0) || cb != 1 {
		t.Fatalf("cas values across the wrap = %d, %d; want MaxUint32, 1 (0 is skipped)", ca, cb)
	}
}

// The binding must take any id the host sends without panicking: unknown
// ids, ids after delete, callouts nobody made.
func TestUnknownContextIDsNeverPanic(t *testing.T) {
	e := NewEmulator(Options{VMContext: &types.DefaultVMContext{}})
	e.StartPlugin()
	g := e.guest()
	e.nv.Enter()
	defer e.nv.Exit()
	for _, id := range []uint32{0, 99, e.h.rootID + 100} {
		g.OnContextCreate(id+1, id+50) // unknown parent
		if a := g.OnRequestHeaders(id, 1, true); a != abi.ActionContinue {
			t.Errorf("OnRequestHeaders(%d) = %d", id, a)
		}
		g.OnRequestBody(id, 1, true)
		g.OnRequestTrailers(id, 1)
		g.OnResponseHeaders(id, 1, true)
		g.OnResponseBody(id, 1, true)
		g.OnResponseTrailers(id, 1)
		g.OnHttpCallResponse(id, 12345, 1, 1, 1)
		g.OnTick(id)
		g.OnQueueReady(id, 1)
		g.OnLog(id)
		if !g.OnDone(id) {
			t.Errorf("OnDone(%d) = false", id)
		}
		g.OnDelete(id)
		if g.OnConfigure(id+100, 0) {
			t.Errorf("OnConfigure(unknown %d) = true", id+100)
		}
	}
	g.OnDelete(e.h.rootID)
	g.OnDelete(e.h.rootID)
	g.OnTick(e.h.rootID)
}

// proxy_close_stream resets the stream after the call; the host then ends
// it, so the filter's OnHttpStreamDone runs.
func TestCloseStreamEndsTheStream(t *testing.T) {
	e, s := newBare(t)
	e.nv.Enter()
	if st := e.h.CloseStream(abi.StreamRequest); st != abi.StatusOK {
		t.Fatalf("CloseStream = %d", st)
	}
	e.afterCall()
	e.nv.Exit()
	if !e.IsHttpStreamReset(s.id) || e.h.streams[s.id] != nil {
		t.Fatal("the reset stream must be completed and gone")
	}
	if st := e.h.CloseStream(7); st != abi.StatusBadArgument {
		t.Errorf("CloseStream(7) = %d", st)
	}
}
