package wasmtest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// streamsOf is how many streams worker n's VM has served.
func streamsOf(h *Host, n int) int {
	v := h.workers[n-1].v.Load()
	v.mu.Lock()
	defer v.mu.Unlock()
	return int(v.total.Streams)
}

// TestProxyServesOnTheFirstFreeWorker: requests one after another all go to
// worker 1 (its memory stays in the caches, its rows leave together); a
// request that arrives while worker 1 holds a stream, or while it runs a
// call of its own (a tick), goes to worker 2; Do keeps its turns.
func TestProxyServesOnTheFirstFreeWorker(t *testing.T) {
	hold := make(chan struct{})
	held := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			close(held)
			<-hold
		}
		echo(w, r)
	})
	h := newHost(t, Config{Workers: 2, Upstream: Cluster{Handler: up}})
	front := httptest.NewServer(h)
	defer front.Close()
	// quiet waits until no stream is in flight: a client can have its
	// answer before the stream's last callbacks ran.
	quiet := func() {
		for h.workers[0].busy.Load()+h.workers[1].busy.Load() > 0 {
			time.Sleep(time.Millisecond)
		}
	}
	get := func(hdr string) {
		req, _ := http.NewRequest("POST", front.URL+"/v1/chat/completions", strings.NewReader(`{}`))
		if hdr != "" {
			req.Header.Set("X-Hold", hdr)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("status %d", resp.StatusCode)
		}
	}
	for i := 0; i < 5; i++ {
		get("")
		quiet()
	}
	if a, b := streamsOf(h, 1), streamsOf(h, 2); a != 5 || b != 0 {
		t.Fatalf("five requests one after another: worker 1 served %d, worker 2 %d; want 5 and 0", a, b)
	}

	// Worker 1 holds a stream: the next request goes to worker 2.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		get("1")
	}()
	<-held
	get("")
	close(hold)
	wg.Wait()
	quiet()
	if a, b := streamsOf(h, 1), streamsOf(h, 2); a != 6 || b != 1 {
		t.Errorf("a request while worker 1 held one: worker 1 served %d, worker 2 %d; want 6 and 1", a, b)
	}

	// Worker 1 runs a call of its own (its lock is held, as by a tick):
	// the next request goes to worker 2.
	v1 := h.workers[0].v.Load()
	v1.mu.Lock()
	w := h.leastBusy()
	v1.mu.Unlock()
	if w.index != 2 {
		t.Errorf("with worker 1 in a call, the proxy picked worker %d; want 2", w.index)
	}
	// Both in calls: the one with the fewest streams, the first on a tie.
	v2 := h.workers[1].v.Load()
	v1.mu.Lock()
	v2.mu.Lock()
	w = h.leastBusy()
	v2.mu.Unlock()
	v1.mu.Unlock()
	if w.index != 1 {
		t.Errorf("with both workers in calls and no stream, the proxy picked worker %d; want 1", w.index)
	}

	// Do takes the workers in turn.
	for i := 0; i < 4; i++ {
		if r := h.Do(Request{Method: "POST", Path: "/v1/chat/completions", BodyChunks: [][]byte{[]byte(`{}`)}}); r.Status != 200 {
			t.Fatalf("Do: status %d", r.Status)
		}
	}
	if a, b := streamsOf(h, 1), streamsOf(h, 2); a != 8 || b != 3 {
		t.Errorf("four requests through Do: worker 1 served %d in all, worker 2 %d; want 8 and 3", a, b)
	}
}
