package wasmtest

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// Each worker VM ticks on its own root context, one period after the
// period was set and one period after each tick.
func TestTicksPerWorker(t *testing.T) {
	clock := NewManualClock(t0)
	h := newHost(t, Config{Clock: clock, PluginConfig: []byte("tick"), Workers: 2})
	steps := []struct {
		advance time.Duration
		want    int64
	}{
		{999 * time.Millisecond, 0},
		{time.Millisecond, 2},
		{500 * time.Millisecond, 2},
		{2500 * time.Millisecond, 8},
	}
	for i, s := range steps {
		clock.Advance(s.advance)
		got, _ := h.Metric("ticks_total")
		if got != s.want {
			t.Errorf("step %d: after %v, ticks_total = %d, want %d", i, s.advance, got, s.want)
		}
	}
	if v, _, _ := h.SharedData("ticks"); string(v) != "8" {
		t.Errorf("ticks in shared data = %q, want 8", v)
	}
}

// A callout made from a tick is delivered to the root context.
func TestTickCallout(t *testing.T) {
	clock := NewManualClock(t0)
	h := newHost(t, Config{Clock: clock, PluginConfig: []byte("tick tick-call"), Clusters: map[string]Cluster{
		"auth": {Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })},
	}})
	clock.Advance(3 * time.Second)
	if err := h.WaitCallouts(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := h.SharedData("tick-calls"); string(v) != "3" {
		t.Errorf("tick-calls = %q, want 3", v)
	}
}

func TestManualClock(t *testing.T) {
	c := NewManualClock(t0)
	var fired []string
	c.AfterFunc(2*time.Second, func() { fired = append(fired, "b@"+c.Now().Sub(t0).String()) })
	c.AfterFunc(time.Second, func() {
		fired = append(fired, "a@"+c.Now().Sub(t0).String())
		c.AfterFunc(500*time.Millisecond, func() { fired = append(fired, "c@"+c.Now().Sub(t0).String()) })
	})
	stopped := c.AfterFunc(1500*time.Millisecond, func() { fired = append(fired, "never") })
	if !stopped.Stop() || stopped.Stop() {
		t.Error("Stop should succeed once")
	}
	c.Advance(3 * time.Second)
	want := []string{"a@1s", "c@1.5s", "b@2s"}
	if len(fired) != len(want) {
		t.Fatalf("fired %v, want %v", fired, want)
	}
	for i := range want {
		if fired[i] != want[i] {
			t.Errorf("step %d: %s, want %s", i, fired[i], want[i])
		}
	}
	if c.Now() != t0.Add(3*time.Second) || c.Monotonic() != 4*time.Second {
		t.Errorf("now %v monotonic %v", c.Now(), c.Monotonic())
	}
}
