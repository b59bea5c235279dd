package filter

import (
	"sync"
	"testing"
	"time"
)

// memStore is shared data with Envoy's rules (proxy-wasm.md 3.4): a global
// cas counter starting at 1; a set on an existing key with a non-zero cas
// that differs fails; a set on a missing key always succeeds.
type memStore struct {
	mu   sync.Mutex
	cas  uint32
	data map[string]memValue
	ops  int
	// strict makes every set a strict compare-and-swap, as some hosts
	// other than Envoy do: a missing key takes only cas 0, an existing key
	// only its current cas.
	strict bool
}

type memValue struct {
	b   []byte
	cas uint32
}

func newMemStore() *memStore { return &memStore{data: map[string]memValue{}} }

func newStrictStore() *memStore { return &memStore{data: map[string]memValue{}, strict: true} }

// stores are the two compare-and-swap rule sets the filter runs on.
var stores = []struct {
	name string
	new  func() *memStore
}{{"envoy", newMemStore}, {"strict", newStrictStore}}

// eachStore runs f as a subtest on a fresh store of each rule set.
func eachStore(t *testing.T, f func(t *testing.T, store *memStore)) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) { f(t, st.new()) })
	}
}

// race runs f on each engine at once, each on its own goroutine, and
// waits for them all.
func race(es []*Engine, f func(e *Engine)) {
	var wg sync.WaitGroup
	for _, e := range es {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(e)
		}()
	}
	wg.Wait()
}

func (m *memStore) Get(key string) ([]byte, uint32, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ops++
	v, ok := m.data[key]
	if !ok {
		return nil, 0, false, nil
	}
	return append([]byte(nil), v.b...), v.cas, true, nil
}

func (m *memStore) Set(key string, value []byte, cas uint32) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ops++
	v, ok := m.data[key]
	switch {
	case m.strict && !ok && cas != 0, m.strict && ok && cas != v.cas:
		return false, nil
	case ok && cas != 0 && cas != v.cas:
		return false, nil
	}
	m.cas++
	if m.cas == 0 {
		m.cas = 1
	}
	m.data[key] = memValue{b: append([]byte(nil), value...), cas: m.cas}
	return true, nil
}

func (m *memStore) raw(key string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.data[key].b
}

// manualClock is a clock the test moves.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// countMetrics counts metric additions.
type countMetrics struct {
	mu      sync.Mutex
	n       [metricCount]uint64
	refused map[string]uint64 // by RefusalStat
	gauges  [gaugeCount]int64
}

func (m *countMetrics) Refused(limitID, limitType string) {
	m.mu.Lock()
	if m.refused == nil {
		m.refused = map[string]uint64{}
	}
	m.refused[RefusalStat(limitID, limitType)]++
	m.mu.Unlock()
}

func (m *countMetrics) Set(g Gauge, v int64) {
	m.mu.Lock()
	m.gauges[g] = v
	m.mu.Unlock()
}

func (m *countMetrics) Add(k Metric, n uint64) {
	m.mu.Lock()
	m.n[k] += n
	m.mu.Unlock()
}

func (m *countMetrics) get(k Metric) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[k]
}

// fakeCaller records callouts; the test answers them.
type fakeCaller struct {
	mu    sync.Mutex
	calls []*fakeCall
}

type fakeCall struct {
	method, path string
	body         []byte
	cb           func(int, []byte)
}

func (f *fakeCaller) Call(method, path string, _ [][2]string, body []byte, _ time.Duration, cb func(int, []byte)) error {
	f.mu.Lock()
	f.calls = append(f.calls, &fakeCall{method: method, path: path, body: append([]byte(nil), body...), cb: cb})
	f.mu.Unlock()
	return nil
}

// take removes and returns the pending calls.
func (f *fakeCaller) take() []*fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func testLog(t testing.TB) func(LogLevel, string) {
	return func(l LogLevel, msg string) { t.Logf("filter log %d: %s", l, msg) }
}

// bytesBody is a BodySource over bytes already in memory.
type bytesBody []byte

func (b bytesBody) Body(n int) []byte { return b[:min(n, len(b))] }
