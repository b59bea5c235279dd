package wasmtest

import (
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Envoy's CAS rules, step by step (shared/proxy-wasm.md 3.4).
func TestSharedDataCASRules(t *testing.T) {
	h := newHost(t, Config{})
	resp := h.Do(Request{Headers: hdr("X-Mode", "cas-rules")})
	want := "get-absent=1 set-new-any-cas=0 set-stale=8 set-current=0 cas-grew=true set-old=8 set-zero=0 value=5 set-empty=0 get-empty=0:0"
	if got := string(resp.Body); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// Several worker VMs share one store: a compare-and-swap counter bumped by
// many concurrent requests across them ends at exactly the number of
// requests, and no two requests saw the same value.
func TestSharedDataAcrossVMsUnderConcurrency(t *testing.T) {
	h := newHost(t, Config{Workers: 4})
	const goroutines, each = 8, 25
	var mu sync.Mutex
	var seen []int
	retries := 0
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				resp := h.Do(Request{Headers: hdr("X-Mode", "shared")})
				f := strings.Fields(string(resp.Body))
				if len(f) != 2 {
					t.Errorf("body %q", resp.Body)
					return
				}
				n, _ := strconv.Atoi(f[0])
				r, _ := strconv.Atoi(f[1])
				mu.Lock()
				seen = append(seen, n)
				retries += r
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	v, _, _ := h.SharedData("counter")
	if string(v) != strconv.Itoa(goroutines*each) {
		t.Errorf("counter = %s, want %d", v, goroutines*each)
	}
	sort.Ints(seen)
	for i, n := range seen {
		if n != i+1 {
			t.Fatalf("values seen %v…: not each of 1..%d once", seen[:i+1], goroutines*each)
		}
	}
	c := h.Counts()
	if c.SharedGets < goroutines*each || c.SharedSets < goroutines*each || c.Streams != goroutines*each {
		t.Errorf("counts %+v", c)
	}
	t.Logf("CAS retries: %d", retries)
}

func TestSharedDataFromTheTest(t *testing.T) {
	h := newHost(t, Config{})
	h.SetSharedData("counter", []byte("41"))
	resp := h.Do(Request{Headers: hdr("X-Mode", "shared")})
	if string(resp.Body) != "42 0" {
		t.Errorf("got %q", resp.Body)
	}
	if _, cas, ok := h.SharedData("counter"); !ok || cas != 2 {
		t.Errorf("cas = %d, want 2 (the counter starts at 1)", cas)
	}
}
