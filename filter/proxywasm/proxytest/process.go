package proxytest

import (
	"errors"
	"slices"
	"sync"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"
)

// process is what the VMs of one host process share: shared data (one
// vm_id namespace) and the metric store.
type process struct {
	opts  Options
	props map[string][]byte // Options.Properties by wire path

	mu     sync.Mutex
	shared map[string]sharedCell
	cas    uint32

	metricsMu sync.Mutex
	metrics   map[metricKey]*metricValue
}

type sharedCell struct {
	value []byte
	cas   uint32
}

func newProcess(opts Options) *process {
	return &process{
		opts:    opts,
		props:   wireProperties(opts.Properties),
		shared:  map[string]sharedCell{},
		cas:     1,
		metrics: map[metricKey]*metricValue{},
	}
}

// nextCas hands out Envoy's global CAS values: 1, 2, …, skipping 0 on wrap.
func (p *process) nextCas() uint32 {
	c := p.cas
	p.cas++
	if p.cas == 0 {
		p.cas = 1
	}
	return c
}

func (p *process) getShared(key string) ([]byte, uint32, uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.shared[key]
	if !ok {
		return nil, 0, abi.StatusNotFound
	}
	return clone(c.value), c.cas, abi.StatusOK
}

// setShared applies cpp-host's rules: an existing key with a non-zero cas
// that is not its current cas is a CAS_MISMATCH; a missing key, or cas 0,
// always succeeds; every success takes the next global cas.
func (p *process) setShared(key string, value []byte, cas uint32) uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.shared[key]; ok && cas != 0 && cas != c.cas {
		return abi.StatusCasMismatch
	}
	p.shared[key] = sharedCell{value: clone(value), cas: p.nextCas()}
	return abi.StatusOK
}

// GetSharedData reads the process's shared data as a filter would, for
// assertions; types.ErrorStatusNotFound for a missing key.
func (e *Emulator) GetSharedData(key string) ([]byte, uint32, error) {
	v, cas, st := e.proc.getShared(key)
	if st != abi.StatusOK {
		return nil, 0, types.ErrorStatusNotFound
	}
	return v, cas, nil
}

// SetSharedData writes the process's shared data with the host's CAS
// rules, to seed state before a test.
func (e *Emulator) SetSharedData(key string, value []byte, cas uint32) error {
	if e.proc.setShared(key, value, cas) != abi.StatusOK {
		return types.ErrorStatusCasMismatch
	}
	return nil
}

// SharedDataKeys returns every key in the process's shared data.
func (e *Emulator) SharedDataKeys() []string {
	e.proc.mu.Lock()
	defer e.proc.mu.Unlock()
	keys := make([]string, 0, len(e.proc.shared))
	for k := range e.proc.shared {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

type metricKey struct {
	kind uint32
	name string
}

type metricValue struct {
	kind    uint32
	counter uint64
	gauge   int64
	samples []uint64
}

func (p *process) metric(kind uint32, name string) *metricValue {
	p.metricsMu.Lock()
	defer p.metricsMu.Unlock()
	k := metricKey{kind, name}
	m := p.metrics[k]
	if m == nil {
		m = &metricValue{kind: kind}
		p.metrics[k] = m
	}
	return m
}

func (p *process) lookupMetric(kind uint32, name string) (*metricValue, error) {
	p.metricsMu.Lock()
	defer p.metricsMu.Unlock()
	m := p.metrics[metricKey{kind, name}]
	if m == nil {
		return nil, errors.New("proxytest: no " + metricKinds[kind] + " metric named " + name + " has been defined")
	}
	return m, nil
}

var metricKinds = [...]string{"counter", "gauge", "histogram"}

// GetCounterMetric returns a counter's value, summed over every VM of the
// process as Envoy's stat is.
func (e *Emulator) GetCounterMetric(name string) (uint64, error) {
	return readMetric(e, abi.MetricCounter, name, func(m *metricValue) uint64 { return m.counter })
}

// GetGaugeMetric returns a gauge's value.
func (e *Emulator) GetGaugeMetric(name string) (int64, error) {
	return readMetric(e, abi.MetricGauge, name, func(m *metricValue) int64 { return m.gauge })
}

// GetHistogramMetric returns every sample recorded in a histogram.
func (e *Emulator) GetHistogramMetric(name string) ([]uint64, error) {
	return readMetric(e, abi.MetricHistogram, name, func(m *metricValue) []uint64 { return append([]uint64(nil), m.samples...) })
}

// readMetric reads a metric of the kind named, under the process's
// metrics lock.
func readMetric[T any](e *Emulator, kind uint32, name string, read func(*metricValue) T) (T, error) {
	m, err := e.proc.lookupMetric(kind, name)
	if err != nil {
		var zero T
		return zero, err
	}
	e.proc.metricsMu.Lock()
	defer e.proc.metricsMu.Unlock()
	return read(m), nil
}
