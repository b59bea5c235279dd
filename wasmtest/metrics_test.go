package wasmtest

import "testing"

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
