package wasmtest

import (
	"net/http"
	"testing"
)

// TestProfileTimesEveryExport: every guest call is counted under its
// export, and a call that holds its VM past SlowCallAt is kept among the
// slow calls with the VM that ran it; quick calls are not.
func TestProfileTimesEveryExport(t *testing.T) {
	h := newHost(t, Config{Workers: 2})
	for i := 0; i < 3; i++ {
		if r := h.Do(Request{Path: "/quick", VM: 1}); r.Status != 200 {
			t.Fatalf("quick request: %d %s", r.Status, r.Body)
		}
	}
	// 200M rounds of a xorshift take far longer than SlowCallAt on any
	// machine this runs on (about 0.2 s at one round a nanosecond).
	spin := http.Header{"X-Mode": {"spin"}, "X-Spin": {"200000000"}}
	if r := h.Do(Request{Path: "/spin", Headers: spin, VM: 2}); r.Status != 200 {
		t.Fatalf("spinning request: %d %s", r.Status, r.Body)
	}
	exports, slow := h.Profile()
	var headers ExportProfile
	for _, p := range exports {
		if p.Export == "proxy_on_request_headers" {
			headers = p
		}
	}
	if headers.Calls != 4 {
		t.Fatalf("proxy_on_request_headers counted %d calls, want 4; profile %+v", headers.Calls, exports)
	}
	if headers.Max < SlowCallAt || headers.Total < headers.Max {
		t.Fatalf("proxy_on_request_headers: max %v, total %v; the spinning call alone held its VM past %v", headers.Max, headers.Total, SlowCallAt)
	}
	var spun []SlowCall
	for _, c := range slow {
		if c.Export == "proxy_on_request_headers" {
			spun = append(spun, c)
		}
	}
	if len(spun) != 1 || spun[0].VM != "worker 2" || spun[0].Took != headers.Max || spun[0].Pages == 0 {
		t.Fatalf("slow request-header calls %+v; want the one spinning call, on worker 2, with its time and memory size", spun)
	}
}
