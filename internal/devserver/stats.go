package devserver

import (
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokentriage/tokentriage/filter"
	"github.com/tokentriage/tokentriage/wasmtest"
)

// gatewayStats shows the filter's stats (counters and gauges the filter
// defines in the embedded gateway) on the accountant's /metrics, named and
// labelled as Envoy's /stats/prometheus shows them with envoy/envoy.yaml's
// stats_tags: tokentriage_refusals{limit_id="team_rpm",limit_type="rpm"},
// tokentriage_admitted, tokentriage_ledger_rows_queued, …
type gatewayStats struct {
	host atomic.Pointer[wasmtest.Host]
}

var _ prometheus.Collector = (*gatewayStats)(nil)

// statTags are the filter's tag rules for the host.
func statTags() []wasmtest.StatTag {
	out := make([]wasmtest.StatTag, len(filter.StatTags))
	for i, t := range filter.StatTags {
		out[i] = wasmtest.StatTag{Name: t.Name, Regex: t.Regex}
	}
	return out
}

// Describe describes nothing: the stats are the filter's to define, so the
// collector is unchecked.
func (g *gatewayStats) Describe(chan<- *prometheus.Desc) {}

func (g *gatewayStats) Collect(ch chan<- prometheus.Metric) {
	h := g.host.Load()
	if h == nil {
		return
	}
	for _, st := range h.Stats() {
		names := make([]string, len(st.Tags))
		values := make([]string, len(st.Tags))
		for i, t := range st.Tags {
			names[i], values[i] = t[0], t[1]
		}
		kind := prometheus.CounterValue
		if st.Kind == "gauge" {
			kind = prometheus.GaugeValue
		}
		desc := prometheus.NewDesc(promName(st.Name), "The gateway filter's "+st.Kind+" "+st.Name+".", names, nil)
		m, err := prometheus.NewConstMetric(desc, kind, float64(st.Value), values...)
		if err != nil {
			continue
		}
		ch <- m
	}
}

// promName spells a stat name as Envoy's Prometheus output does: every
// byte outside [a-zA-Z0-9_:] is '_', and a leading digit gets a '_' before
// it. Custom (Wasm) stats carry no envoy_ prefix.
func promName(s string) string {
	var b strings.Builder
	if s != "" && s[0] >= '0' && s[0] <= '9' {
		b.WriteByte('_')
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
