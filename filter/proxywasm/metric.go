package proxywasm

import "github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"

// Metrics are Envoy stats under the "wasmcustom" namespace; the same name
// in every worker VM is the same stat. Define them in OnPluginStart, never
// in init() (the host traps host calls made during _initialize). Unlike the
// SDK, nothing here panics: a metric whose definition failed is inert (its
// id is 0, which no host hands out) and the failure is logged once.

type (
	// MetricCounter is a counter; see DefineCounterMetric.
	MetricCounter uint32
	// MetricGauge is a gauge; see DefineGaugeMetric.
	MetricGauge uint32
	// MetricHistogram is a histogram; see DefineHistogramMetric.
	MetricHistogram uint32
)

// DefineCounterMetric defines (or finds) the counter name.
func DefineCounterMetric(name string) MetricCounter {
	return MetricCounter(defineMetric(abi.MetricCounter, name))
}

// DefineGaugeMetric defines (or finds) the gauge name.
func DefineGaugeMetric(name string) MetricGauge {
	return MetricGauge(defineMetric(abi.MetricGauge, name))
}

// DefineHistogramMetric defines (or finds) the histogram name.
func DefineHistogramMetric(name string) MetricHistogram {
	return MetricHistogram(defineMetric(abi.MetricHistogram, name))
}

// Increment adds offset to the counter. An offset of 0 makes no host call
// (Envoy rejects it).
func (m MetricCounter) Increment(offset uint64) {
	if m == 0 || offset == 0 || offset > 1<<63-1 {
		return
	}
	hIncrementMetric(uint32(m), int64(offset))
}

// Value returns the counter's value, 0 if the host cannot say.
func (m MetricCounter) Value() uint64 { return metricValue(uint32(m)) }

// Add adds offset (which may be negative) to the gauge.
func (m MetricGauge) Add(offset int64) {
	if m == 0 || offset == 0 {
		return
	}
	hIncrementMetric(uint32(m), offset)
}

// Set sets the gauge to value.
func (m MetricGauge) Set(value int64) {
	if m == 0 {
		return
	}
	hRecordMetric(uint32(m), uint64(value))
}

// Value returns the gauge's value.
func (m MetricGauge) Value() int64 { return int64(metricValue(uint32(m))) }

// Record records one sample in the histogram.
func (m MetricHistogram) Record(value uint64) {
	if m == 0 {
		return
	}
	hRecordMetric(uint32(m), value)
}

// Value returns 0: Envoy cannot read a histogram back (BAD_ARGUMENT). It
// exists so code written against the SDK compiles.
func (m MetricHistogram) Value() uint64 { return metricValue(uint32(m)) }

func defineMetric(t uint32, name string) uint32 {
	id, st := hDefineMetric(t, name)
	if st != abi.StatusOK {
		hLog(abi.LogError, "proxywasm: defining metric "+name+": "+statusToError(st).Error()+
			" (define metrics in OnPluginStart, not in init)")
		return 0
	}
	return id
}

func metricValue(id uint32) uint64 {
	if id == 0 {
		return 0
	}
	v, st := hGetMetric(id)
	if st != abi.StatusOK {
		return 0
	}
	return v
}
