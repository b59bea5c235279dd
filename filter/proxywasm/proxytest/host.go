package proxytest

import (
	"bytes"
	"compress/zlib"
	"io"
	"strings"

	"github.com/tokentriage/tokentriage/filter/proxywasm"
	"github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"
	"github.com/tokentriage/tokentriage/filter/proxywasm/internal/nativehost"
)

// vmHost is the host side of one emulated VM. Its methods implement the
// proxy-wasm host calls with Envoy's semantics; they run on the goroutine
// of the callback that called them, under the VM's lock.
type vmHost struct {
	proc *process

	nextID      uint32
	rootID      uint32
	rootAlive   bool
	vmStarted   bool
	vmOK        bool
	configuring bool
	donePending bool
	doneCalled  bool
	effective   uint32
	streams     map[uint32]*stream
	resets      map[uint32]bool
	touched     []*stream
	tickPeriod  uint32

	callouts map[uint32]*HttpCalloutAttribute
	nextCall uint32
	callResp *callResponse

	status    uint32
	statusMsg string

	metricIDs  map[uint32]*metricValue
	metricByID map[metricKey]uint32
	nextMetric [3]uint32
	nextSeq    uint32 // Options.SequentialMetricIDs

	logs []LogEntry

	hostCalls uint64
	sharedOps uint64
}

var _ nativehost.Host = (*vmHost)(nil)

func newVMHost(p *process) *vmHost {
	return &vmHost{
		proc:       p,
		streams:    map[uint32]*stream{},
		resets:     map[uint32]bool{},
		callouts:   map[uint32]*HttpCalloutAttribute{},
		metricIDs:  map[uint32]*metricValue{},
		metricByID: map[metricKey]uint32{},
		nextMetric: [3]uint32{abi.MetricCounter, abi.MetricGauge, abi.MetricHistogram},
	}
}

// allocID hands out context ids: 1, 2, … (0 is the VM context).
func (h *vmHost) allocID() uint32 {
	h.nextID++
	return h.nextID
}

// cur returns the stream the host treats as current, nil for the root.
func (h *vmHost) cur() *stream {
	if s := h.streams[h.effective]; s != nil && !s.finished {
		return s
	}
	return nil
}

func (h *vmHost) Log(level uint32, msg string) uint32 {
	h.hostCalls++
	if level > abi.LogCritical {
		return abi.StatusBadArgument
	}
	if proxywasm.LogLevel(level) < h.proc.opts.LogLevel {
		return abi.StatusOK
	}
	if len(h.logs) >= maxLogs {
		h.logs = append(h.logs[:0], h.logs[len(h.logs)/2:]...)
	}
	h.logs = append(h.logs, LogEntry{Level: proxywasm.LogLevel(level), Message: msg})
	return abi.StatusOK
}

func (h *vmHost) GetLogLevel() (uint32, uint32) {
	h.hostCalls++
	return uint32(h.proc.opts.LogLevel), abi.StatusOK
}

func (h *vmHost) SetTickPeriod(ms uint32) uint32 {
	h.hostCalls++
	if !h.rootAlive {
		return abi.StatusNotFound
	}
	h.tickPeriod = ms
	return abi.StatusOK
}

func (h *vmHost) SetEffectiveContext(id uint32) uint32 {
	h.hostCalls++
	if (id == h.rootID && h.rootAlive) || (h.streams[id] != nil && !h.streams[id].finished) {
		h.effective = id
		return abi.StatusOK
	}
	return abi.StatusBadArgument
}

func (h *vmHost) Done() uint32 {
	h.hostCalls++
	if !h.donePending {
		return abi.StatusNotFound
	}
	h.doneCalled = true
	return abi.StatusOK
}

// buffer returns the buffer bt names in the current context, and whether
// the filter may change it.
func (h *vmHost) buffer(bt uint32) (buf *[]byte, writable bool) {
	switch bt {
	case abi.BufferHttpRequestBody:
		if s := h.cur(); s != nil && s.req.bodyLive {
			return &s.req.body, true
		}
	case abi.BufferHttpResponseBody:
		if s := h.cur(); s != nil && s.resp.bodyLive {
			return &s.resp.body, true
		}
	case abi.BufferHttpCallResponseBody:
		if h.callResp != nil {
			return &h.callResp.body, false
		}
	case abi.BufferVMConfiguration:
		b := h.proc.opts.VMConfiguration
		return &b, false
	case abi.BufferPluginConfiguration:
		if h.configuring {
			b := h.proc.opts.PluginConfiguration
			return &b, false
		}
	}
	return nil, false
}

func (h *vmHost) GetBufferBytes(bt, start, max uint32) ([]byte, uint32) {
	h.hostCalls++
	buf, _ := h.buffer(bt)
	if buf == nil {
		return nil, abi.StatusNotFound
	}
	b := *buf
	if uint64(start) >= uint64(len(b)) {
		return nil, abi.StatusOK
	}
	end := uint64(start) + uint64(max)
	if end > uint64(len(b)) {
		end = uint64(len(b))
	}
	return clone(b[start:end]), abi.StatusOK
}

// SetBufferBytes applies Envoy's Buffer::copyFrom: (0,0) prepends,
// (0, ≥len) replaces, start ≥ len appends, anything else is BAD_ARGUMENT.
func (h *vmHost) SetBufferBytes(bt, start, size uint32, data []byte) uint32 {
	h.hostCalls++
	buf, writable := h.buffer(bt)
	if buf == nil {
		return abi.StatusNotFound
	}
	if !writable {
		return abi.StatusBadArgument
	}
	n := uint32(len(*buf))
	switch {
	case start == 0 && size == 0:
		*buf = append(clone(data), *buf...)
	case start == 0 && size >= n:
		*buf = append([]byte{}, data...)
	case start != 0 && start >= n:
		*buf = append(*buf, data...)
	default:
		return abi.StatusBadArgument
	}
	return abi.StatusOK
}

func (h *vmHost) GetBufferStatus(bt uint32) (length, flags, status uint32) {
	h.hostCalls++
	buf, _ := h.buffer(bt)
	if buf == nil {
		return 0, 0, abi.StatusNotFound
	}
	return uint32(len(*buf)), 0, abi.StatusOK
}

// constMap is Envoy's getConstMap: the map bt names if the filter can read
// it now. logPhase reports proxy_on_log, where a missing map is NOT_FOUND
// rather than BAD_ARGUMENT.
func (h *vmHost) constMap(mt uint32) (m [][2]string, ok, logPhase bool) {
	switch mt {
	case abi.MapHttpCallResponseHeaders:
		if h.callResp != nil {
			return h.callResp.headers, true, false
		}
		return nil, false, false
	case abi.MapHttpCallResponseTrailers:
		if h.callResp != nil && h.callResp.trailers != nil {
			return h.callResp.trailers, true, false
		}
		return nil, false, false
	}
	s := h.cur()
	if s == nil {
		return nil, false, false
	}
	if s.inLog {
		switch mt {
		case abi.MapHttpRequestHeaders:
			return s.req.headers, s.req.headers != nil, true
		case abi.MapHttpResponseHeaders:
			return s.resp.headers, s.resp.headers != nil, true
		case abi.MapHttpResponseTrailers:
			return s.resp.trailers, s.resp.trailers != nil, true
		}
		return nil, false, true
	}
	p, ok := h.mutMap(mt, false)
	if !ok {
		return nil, false, false
	}
	return *p, true, false
}

// mutMap is Envoy's getMap: the map the filter may change now. A request
// (response) body callback at end of stream may create the trailers.
func (h *vmHost) mutMap(mt uint32, create bool) (*[][2]string, bool) {
	s := h.cur()
	if s == nil || s.inLog {
		return nil, false
	}
	switch mt {
	case abi.MapHttpRequestHeaders:
		return &s.req.headers, s.req.headersLive
	case abi.MapHttpRequestTrailers:
		return s.req.trailerMap(create)
	case abi.MapHttpResponseHeaders:
		return &s.resp.headers, s.resp.headersLive
	case abi.MapHttpResponseTrailers:
		return s.resp.trailerMap(create)
	}
	return nil, false
}

// trailerMap is the flow's trailers; a body callback at end of stream may
// create them.
func (f *flow) trailerMap(create bool) (*[][2]string, bool) {
	if !f.trailersLive && create && f.inBody && f.eos {
		f.trailers, f.trailersLive = [][2]string{}, true
	}
	return &f.trailers, f.trailersLive
}

func (h *vmHost) GetHeaderMapPairs(mt uint32) ([]byte, uint32) {
	h.hostCalls++
	m, ok, _ := h.constMap(mt)
	if !ok || len(m) == 0 {
		return nil, abi.StatusOK
	}
	return abi.AppendPairs(nil, m), abi.StatusOK
}

func (h *vmHost) SetHeaderMapPairs(mt uint32, data []byte) uint32 {
	h.hostCalls++
	p, ok := h.mutMap(mt, true)
	if !ok {
		return abi.StatusBadArgument
	}
	*p = decodeHostPairs(data)
	if *p == nil {
		*p = [][2]string{}
	}
	return abi.StatusOK
}

func (h *vmHost) GetHeaderMapSize(mt uint32) (uint32, uint32) {
	h.hostCalls++
	p, ok := h.mutMap(mt, false)
	if !ok {
		return 0, abi.StatusBadArgument
	}
	return byteSize(*p), abi.StatusOK
}

func (h *vmHost) GetHeaderMapValue(mt uint32, key string) ([]byte, uint32) {
	h.hostCalls++
	m, ok, logPhase := h.constMap(mt)
	if !ok {
		if logPhase {
			return nil, abi.StatusNotFound
		}
		return nil, abi.StatusBadArgument
	}
	v, found := firstValue(m, strings.ToLower(key))
	if !found {
		return nil, abi.StatusNotFound
	}
	return []byte(v), abi.StatusOK
}

// editMap applies edit to the map the filter may change now (a body
// callback at end of stream may create the trailers).
func (h *vmHost) editMap(mt uint32, edit func([][2]string) [][2]string) uint32 {
	h.hostCalls++
	p, ok := h.mutMap(mt, true)
	if !ok {
		return abi.StatusBadArgument
	}
	*p = edit(*p)
	return abi.StatusOK
}

func (h *vmHost) AddHeaderMapValue(mt uint32, key, value string) uint32 {
	return h.editMap(mt, func(m [][2]string) [][2]string { return append(m, [2]string{strings.ToLower(key), value}) })
}

func (h *vmHost) ReplaceHeaderMapValue(mt uint32, key, value string) uint32 {
	return h.editMap(mt, func(m [][2]string) [][2]string { return replaceKey(m, strings.ToLower(key), value) })
}

func (h *vmHost) RemoveHeaderMapValue(mt uint32, key string) uint32 {
	return h.editMap(mt, func(m [][2]string) [][2]string { return removeKey(m, strings.ToLower(key)) })
}

// ContinueStream defers the resume until the VM call returns, and drops the
// request's maps and body from the filter's reach at once (Envoy
// Context::continueStream).
func (h *vmHost) ContinueStream(st uint32) uint32 {
	h.hostCalls++
	switch st {
	case abi.StreamRequest, abi.StreamResponse:
	case abi.StreamDownstream:
		return abi.StatusOK
	case abi.StreamUpstream:
		return abi.StatusUnimplemented
	default:
		return abi.StatusBadArgument
	}
	s := h.cur()
	if s == nil {
		return abi.StatusOK
	}
	if st == abi.StreamRequest {
		s.req.resume = true
	} else {
		s.resp.resume = true
	}
	s.req.headersLive, s.req.bodyLive, s.req.trailersLive = false, false, false
	h.touch(s)
	return abi.StatusOK
}

// CloseStream resets the stream after the VM call returns; the host then
// ends it (on_log, on_done, on_delete).
func (h *vmHost) CloseStream(st uint32) uint32 {
	h.hostCalls++
	if st > abi.StreamUpstream {
		return abi.StatusBadArgument
	}
	if s := h.cur(); s != nil && st <= abi.StreamResponse {
		s.pendingReset = true
		h.resets[s.id] = true
		h.touch(s)
	}
	return abi.StatusOK
}

// SendLocalResponse records a local reply, sent after the VM call returns.
// Envoy answers OK even outside a stream (and then does nothing).
func (h *vmHost) SendLocalResponse(status uint32, details string, body, headers []byte, grpcStatus int32) uint32 {
	h.hostCalls++
	s := h.cur()
	if s == nil || s.pendingLocal != nil {
		return abi.StatusOK
	}
	s.pendingLocal = &LocalHttpResponse{
		StatusCode:       status,
		StatusCodeDetail: strings.Join(strings.Fields(details), "_"),
		Data:             clone(body),
		Headers:          decodeHostPairs(headers),
		GRPCStatus:       grpcStatus,
	}
	h.touch(s)
	return abi.StatusOK
}

func (h *vmHost) GetSharedData(key string) ([]byte, uint32, uint32) {
	h.hostCalls++
	h.sharedOps++
	return h.proc.getShared(key)
}

func (h *vmHost) SetSharedData(key string, value []byte, cas uint32) uint32 {
	h.hostCalls++
	h.sharedOps++
	return h.proc.setShared(key, value, cas)
}

// DefineMetric gives each (type, name) one id per VM: counters 4, 8, …,
// gauges 5, 9, …, histograms 6, 10, … (id & 3 is the type), as Envoy does;
// with Options.SequentialMetricIDs, 0, 1, 2, … in definition order whatever
// the type, as the upstream SDK's test host does. The value is the
// process's, shared by every VM, as Envoy's stat is.
func (h *vmHost) DefineMetric(t uint32, name string) (uint32, uint32) {
	h.hostCalls++
	if t > abi.MetricHistogram {
		return 0, abi.StatusBadArgument
	}
	k := metricKey{t, name}
	if id, ok := h.metricByID[k]; ok {
		return id, abi.StatusOK
	}
	var id uint32
	if h.proc.opts.SequentialMetricIDs {
		id = h.nextSeq
		h.nextSeq++
	} else {
		h.nextMetric[t] += 4
		id = h.nextMetric[t]
	}
	h.metricByID[k] = id
	h.metricIDs[id] = h.proc.metric(t, name)
	return id, abi.StatusOK
}

// metricKind is the type of the metric id names: its own with sequential
// ids, id & 3 with Envoy's. An id no metric has keeps Envoy's reading, so
// the status of a call on it is Envoy's (NOT_FOUND or BAD_ARGUMENT).
func (h *vmHost) metricKind(id uint32) (*metricValue, uint32) {
	m := h.metricIDs[id]
	if m != nil && h.proc.opts.SequentialMetricIDs {
		return m, m.kind
	}
	return m, id & 3
}

func (h *vmHost) IncrementMetric(id uint32, delta int64) uint32 {
	h.hostCalls++
	m, kind := h.metricKind(id)
	switch kind {
	case abi.MetricCounter:
		if m == nil {
			return abi.StatusNotFound
		}
		if delta <= 0 {
			return abi.StatusBadArgument
		}
		h.proc.metricsMu.Lock()
		m.counter += uint64(delta)
		h.proc.metricsMu.Unlock()
		return abi.StatusOK
	case abi.MetricGauge:
		if m == nil {
			return abi.StatusNotFound
		}
		h.proc.metricsMu.Lock()
		m.gauge += delta
		h.proc.metricsMu.Unlock()
		return abi.StatusOK
	}
	return abi.StatusBadArgument
}

func (h *vmHost) RecordMetric(id uint32, value uint64) uint32 {
	h.hostCalls++
	m, kind := h.metricKind(id)
	if m == nil {
		return abi.StatusNotFound
	}
	h.proc.metricsMu.Lock()
	defer h.proc.metricsMu.Unlock()
	switch kind {
	case abi.MetricCounter:
		m.counter += value
	case abi.MetricGauge:
		m.gauge = int64(value)
	case abi.MetricHistogram:
		m.samples = append(m.samples, value)
	}
	return abi.StatusOK
}

func (h *vmHost) GetMetric(id uint32) (uint64, uint32) {
	h.hostCalls++
	m, kind := h.metricKind(id)
	switch kind {
	case abi.MetricCounter, abi.MetricGauge:
		if m == nil {
			return 0, abi.StatusNotFound
		}
		h.proc.metricsMu.Lock()
		defer h.proc.metricsMu.Unlock()
		if kind == abi.MetricCounter {
			return m.counter, abi.StatusOK
		}
		return uint64(m.gauge), abi.StatusOK
	}
	return 0, abi.StatusBadArgument
}

// CallForeignFunction has the functions of Envoy's that a filter of this
// project calls: clear_route_cache (counted per stream, see
// RouteCacheClears), compress and uncompress (zlib). Others are NOT_FOUND,
// as in a host that does not register them.
func (h *vmHost) CallForeignFunction(name string, args []byte) ([]byte, uint32) {
	h.hostCalls++
	switch name {
	case "clear_route_cache":
		if s := h.cur(); s != nil {
			s.routeClears++
		}
		return nil, abi.StatusOK
	case "compress":
		var b bytes.Buffer
		w := zlib.NewWriter(&b)
		w.Write(args)
		w.Close()
		return b.Bytes(), abi.StatusOK
	case "uncompress":
		r, err := zlib.NewReader(bytes.NewReader(args))
		if err != nil {
			return nil, abi.StatusSerializationFailed
		}
		out, err := io.ReadAll(r)
		if err != nil {
			return nil, abi.StatusSerializationFailed
		}
		return out, abi.StatusOK
	}
	return nil, abi.StatusNotFound
}

func (h *vmHost) GetStatus() (uint32, []byte, uint32) {
	h.hostCalls++
	return h.status, []byte(h.statusMsg), abi.StatusOK
}
