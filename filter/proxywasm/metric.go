package proxywasm

import "github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"

// Metrics are Envoy stats under the "wasmcustom" namespace; the same name
// in every worker VM is the same stat. Define them in OnPluginStart, never
// in init() (the host traps host calls made during _initialize). Unlike the
// SDK, nothing here panics: a metric whose definition failed is inert (it
// makes no host call) and the failure is logged once. Whether a metric is
// defined is kept beside its id, not read from it: Envoy numbers metrics
// from 4, but a host may hand out 0 (the upstream SDK's test host numbers
// them 0, 1, 2, …), and that metric must count like any other.

type (
	// MetricCounter is a counter; see DefineCounterMetric. The zero value
	// is an undefined, inert metric.
	MetricCounter struct{ m metric }
	// MetricGauge is a gauge; see DefineGaugeMetric.
	MetricGauge struct{ m metric }
	// MetricHistogram is a histogram; see DefineHistogramMetric.
	MetricHistogram struct{ m metric }
)

// metric is a host metric id and whether the host handed one out.
type metric struct {
	id      uint32
	defined bool
}

// DefineCounterMetric defines (or finds) the counter name.
func DefineCounterMetric(name string) MetricCounter {
	return MetricCounter{defineMetric(abi.MetricCounter, name)}
}

// DefineGaugeMetric defines (or finds) the gauge name.
func DefineGaugeMetric(name string) MetricGauge {
	return MetricGauge{defineMetric(abi.MetricGauge, name)}
}

// DefineHistogramMetric defines (or finds) the histogram name.
func DefineHistogramMetric(name string) MetricHistogram {
	return MetricHistogram{defineMetric(abi.MetricHistogram, name)}
}

// Defined reports whether the host defined the counter.
func (m MetricCounter) Defined() bool { return m.m.defined }

// Increment adds offset to the counter. An offset of 0 makes no host call
// (Envoy rejects it).
func (m MetricCounter) Increment(offset uint64) {
	if !m.m.defined || offset == 0 || offset > 1<<63-1 {
		return
	}
	hIncrementMetric(m.m.id, int64(offset))
}

// Value returns the counter's value, 0 if the host cannot say.
func (m MetricCounter) Value() uint64 { return m.m.value() }

// Defined reports whether the host defined the gauge.
func (m MetricGauge) Defined() bool { return m.m.defined }

// Add adds offset (which may be negative) to the gauge.
func (m MetricGauge) Add(offset int64) {
	if !m.m.defined || offset == 0 {
		return
	}
	hIncrementMetric(m.m.id, offset)
}

// Set sets the gauge to value.
func (m MetricGauge) Set(value int64) {
	if !m.m.defined {
		return
	}
	hRecordMetric(m.m.id, uint64(value))
}

// Value returns the gauge's value.
func (m MetricGauge) Value() int64 { return int64(m.m.value()) }

// Defined reports whether the host defined the histogram.
func (m MetricHistogram) Defined() bool { return m.m.defined }

// Record records one sample in the histogram.
func (m MetricHistogram) Record(value uint64) {
	if !m.m.defined {
		return
	}
	hRecordMetric(m.m.id, value)
}

// Value returns 0: Envoy cannot read a histogram back (BAD_ARGUMENT). It
// exists so code written against the SDK compiles.
func (m MetricHistogram) Value() uint64 { return m.m.value() }

func defineMetric(t uint32, name string) metric {
	id, st := hDefineMetric(t, name)
	if st != abi.StatusOK {
		hLog(abi.LogError, "proxywasm: defining metric "+name+": "+statusToError(st).Error()+
			" (define metrics in OnPluginStart, not in init)")
		return metric{}
	}
	return metric{id: id, defined: true}
}

func (m metric) value() uint64 {
	if !m.defined {
		return 0
	}
	v, st := hGetMetric(m.id)
	if st != abi.StatusOK {
		return 0
	}
	return v
}
