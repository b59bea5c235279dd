package wasmtest

import (
	"context"
	"fmt"
	"testing"
)

// Envoy's id scheme and rules (shared/proxy-wasm.md 3.7), and values
// summed across workers by name.
func TestMetricRules(t *testing.T) {
	h := newHost(t, Config{Workers: 2})
	// The second VM gets the same ids (they are per VM) and sees the gauge
	// the first one set (it is one stat): 42 + 10 - 3.
	for i, gauge := range []string{"7", "49"} {
		vm := i + 1
		want := "counter=4/0 gauge=5 hist=6 counter2=8 define-bad-type=2 inc-zero=2 inc-neg=2 inc=0 record-counter=0 gauge-inc=0 gauge-dec=0 gauge-value=" + gauge + " gauge-record=0 hist-inc=2 hist-record=0 hist-get=2 get-unknown=1 inc-unknown=1"
		resp := h.Do(Request{Headers: hdr("X-Mode", "metrics"), VM: vm})
		if got := string(resp.Body); got != want {
			t.Errorf("vm %d:\ngot  %s\nwant %s", vm, got, want)
		}
	}
	for name, want := range map[string]int64{"test_counter": 14, "test_gauge": 42, "test_counter2": 0} {
		if got, ok := h.Metric(name); !ok || got != want {
			t.Errorf("Metric(%s) = %d, %v; want %d", name, got, ok, want)
		}
	}
	if got := h.Histogram("test_hist"); len(got) != 2 || got[0] != 7 || got[1] != 7 {
		t.Errorf("Histogram = %v", got)
	}
	if _, ok := h.Metric("nope"); ok {
		t.Error("Metric(nope) found")
	}
}

// Stats shows the plugin's counters and gauges as Envoy's stats handler
// does after stats_config.stats_tags: each matching regex cuts its first
// group out of the name and gives its tag the second group's value.
func TestStatTags(t *testing.T) {
	h := newHost(t, Config{StatTags: []StatTag{
		{Name: "which", Regex: `^test_counter(2)$`},
		{Name: "kind", Regex: `^test_(gauge)$`},
	}})
	h.Do(Request{Headers: hdr("X-Mode", "metrics")})
	got := fmt.Sprint(h.Stats())
	want := "[{test_ [[kind gauge]] gauge 42} {test_counter [[which 2]] counter 0} {test_counter [] counter 7}]"
	if got != want {
		t.Errorf("Stats\ngot  %s\nwant %s", got, want)
	}
	_, err := New(context.Background(), Config{Module: conformance(t), StatTags: []StatTag{{Name: "x", Regex: "no group"}}})
	if want := "wasmtest: Config.StatTags[0] (x): needs a name and a regex with a capture group (the part cut from the name)"; err == nil || err.Error() != want {
		t.Errorf("error %v", err)
	}
}
