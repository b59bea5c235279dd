package wasmtest

import (
	"sort"
	"sync"
	"sync/atomic"
)

// Metrics follow Envoy (shared/proxy-wasm.md 3.7): ids are per VM with the
// type in the low two bits (counters 4, 8, …; gauges 5, 9, …; histograms 6,
// 10, …); the same name in every VM is one stat, so values add up across
// workers. A counter only grows (increment needs delta > 0, record adds); a
// gauge moves both ways and record sets it; a histogram takes samples and
// cannot be read back.

type metric struct {
	kind    uint32
	name    string
	value   atomic.Int64
	mu      sync.Mutex
	samples []uint64
}

type metricKey struct {
	kind uint32
	name string
}

type metricStore struct {
	mu sync.Mutex
	m  map[metricKey]*metric
}

func newMetricStore() *metricStore { return &metricStore{m: map[metricKey]*metric{}} }

func (s *metricStore) define(kind uint32, name string) *metric {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := metricKey{kind, name}
	if m, ok := s.m[k]; ok {
		return m
	}
	m := &metric{kind: kind, name: name}
	s.m[k] = m
	return m
}

// proxy_define_metric(type, name_ptr, name_size, ret_id)
func hostDefineMetric(v *vm, s []uint64) {
	kind, np, nn, ret := uint32(s[0]), uint32(s[1]), uint32(s[2]), uint32(s[3])
	if kind > metricHistogram {
		s[0] = statusBadArgument
		return
	}
	name, ok := v.read(np, nn)
	if !ok {
		s[0] = statusInvalidMemoryAccess
		return
	}
	m := v.h.metrics.define(kind, string(name))
	v.nextMetric[kind] += 4
	id := v.nextMetric[kind]
	v.metrics[id] = m
	if !v.putU32(ret, id) {
		s[0] = statusInvalidMemoryAccess
		return
	}
	s[0] = statusOK
}

// proxy_increment_metric(id, i64 delta)
func hostIncrementMetric(v *vm, s []uint64) {
	id, delta := uint32(s[0]), int64(s[1])
	switch id & 3 {
	case metricCounter, metricGauge:
	default:
		s[0] = statusBadArgument
		return
	}
	m, ok := v.metrics[id]
	if !ok {
		s[0] = statusNotFound
		return
	}
	if m.kind == metricCounter && delta <= 0 {
		s[0] = statusBadArgument
		return
	}
	m.value.Add(delta)
	s[0] = statusOK
}

// proxy_record_metric(id, u64 value)
func hostRecordMetric(v *vm, s []uint64) {
	id, val := uint32(s[0]), s[1]
	m, ok := v.metrics[id]
	if !ok {
		s[0] = statusNotFound
		return
	}
	switch m.kind {
	case metricCounter:
		m.value.Add(int64(val))
	case metricGauge:
		m.value.Store(int64(val))
	case metricHistogram:
		m.mu.Lock()
		m.samples = append(m.samples, val)
		m.mu.Unlock()
	}
	s[0] = statusOK
}

// proxy_get_metric(id, ret_u64)
func hostGetMetric(v *vm, s []uint64) {
	id, ret := uint32(s[0]), uint32(s[1])
	if id&3 == metricHistogram || id&3 == 3 {
		s[0] = statusBadArgument
		return
	}
	m, ok := v.metrics[id]
	if !ok {
		s[0] = statusNotFound
		return
	}
	if !v.putU64(ret, uint64(m.value.Load())) {
		s[0] = statusInvalidMemoryAccess
		return
	}
	s[0] = statusOK
}

// Metric returns the value of the counter or gauge called name, summed over
// every VM (a counter if both exist).
func (h *Host) Metric(name string) (int64, bool) {
	h.metrics.mu.Lock()
	defer h.metrics.mu.Unlock()
	for _, k := range []uint32{metricCounter, metricGauge} {
		if m, ok := h.metrics.m[metricKey{k, name}]; ok {
			return m.value.Load(), true
		}
	}
	return 0, false
}

// Histogram returns the samples recorded in the histogram called name.
func (h *Host) Histogram(name string) []uint64 {
	h.metrics.mu.Lock()
	m, ok := h.metrics.m[metricKey{metricHistogram, name}]
	h.metrics.mu.Unlock()
	if !ok {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]uint64(nil), m.samples...)
}

// MetricNames lists every defined metric, sorted.
func (h *Host) MetricNames() []string {
	h.metrics.mu.Lock()
	defer h.metrics.mu.Unlock()
	var out []string
	for k := range h.metrics.m {
		out = append(out, k.name)
	}
	sort.Strings(out)
	return out
}
