package wasmtest

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestRestrictedInitTraps(t *testing.T) {
	mod := conformance(t)
	for _, call := range []string{"property", "metric"} {
		t.Run(call, func(t *testing.T) {
			_, err := New(context.Background(), Config{Module: mod, Env: map[string]string{"INIT_CALL": call}, Clock: NewManualClock(t0)})
			if err == nil {
				t.Fatal("New succeeded; want the restricted_callback trap from _initialize")
			}
			for _, want := range []string{"wasmtest: canary: initializing the module: Function: _initialize failed: restricted_callback: env.proxy_"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestInitMayLog(t *testing.T) {
	h := newHost(t, Config{Env: map[string]string{"INIT_CALL": "log"}, Workers: 2})
	var vms []int
	for _, e := range h.Logs() {
		if e.Message == "hello from init" && e.Level == LogInfo {
			vms = append(vms, e.VM)
		}
	}
	if len(vms) != 3 || vms[0] != 0 || vms[1] != 1 || vms[2] != 2 {
		t.Errorf("init logged from VMs %v; want the canary and both workers [0 1 2]", vms)
	}
}

func TestConfigureFalseFailsNew(t *testing.T) {
	_, err := New(context.Background(), Config{Module: conformance(t), PluginConfig: []byte("reject"), Clock: NewManualClock(t0)})
	want := "wasmtest: canary: proxy_on_configure returned false: the plugin rejected its configuration (its log: configuration rejected: reject is set)"
	if err == nil || err.Error() != want {
		t.Errorf("New error = %v\nwant %s", err, want)
	}
}

func TestVMStartFalseFailsNew(t *testing.T) {
	_, err := New(context.Background(), Config{Module: conformance(t), VMConfig: []byte("refuse-start"), Clock: NewManualClock(t0)})
	want := "wasmtest: canary: proxy_on_vm_start returned false: the plugin refused to start"
	if err == nil || err.Error() != want {
		t.Errorf("New error = %v\nwant %s", err, want)
	}
}

// The canary is started and configured like every worker, then discarded;
// what it wrote to shared data stays.
func TestCanaryConfiguresBeforeWorkers(t *testing.T) {
	h := newHost(t, Config{PluginConfig: []byte("configure-shared"), Workers: 2})
	v, _, ok := h.SharedData("configured")
	if !ok || string(v) != "3" {
		t.Errorf("configured = %q, %v; want 3 (canary and two workers)", v, ok)
	}
}

func TestEmptyModuleIsAnError(t *testing.T) {
	_, err := New(context.Background(), Config{})
	if err == nil || !strings.Contains(err.Error(), "Config.Module is empty") {
		t.Errorf("New(empty) = %v", err)
	}
}

// Each stream ends with proxy_on_log, then proxy_on_done, then
// proxy_on_delete; in proxy_on_log the request headers are readable again
// and no map is writable.
func TestStreamLifecycleOrder(t *testing.T) {
	h := newHost(t, Config{})
	h.Do(Request{Headers: hdr("X-Request-Id", "life", "X-Mode", "plain")})
	n := notes(t, h, "life")
	if !strings.HasSuffix(n, "|log,done,delete") {
		t.Errorf("lifecycle = %q; want it to end |log,done,delete", n)
	}
	for _, want := range []string{"log-req-hdr=0", "log-add=2", "log-code=200", "log-details=via_upstream"} {
		if !strings.Contains(n, want) {
			t.Errorf("notes %q lack %q", n, want)
		}
	}
}

// cancelOnLog cancels a context once its n-th log line has been written.
type cancelOnLog struct {
	n      int
	cancel context.CancelFunc
}

func (c *cancelOnLog) Write(p []byte) (int, error) {
	if c.n--; c.n == 0 {
		c.cancel()
	}
	return len(p), nil
}

// A context cancelled while the worker VMs start (Ctrl-C during a start
// with many workers) stops New at the next VM instead of starting every
// one of them first.
func TestNewStopsStartingWorkersWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Each VM logs once from _initialize: the canary's and worker 1's lines,
	// then the cancel.
	w := &cancelOnLog{n: 2, cancel: cancel}
	h, err := New(ctx, Config{Module: conformance(t), Env: map[string]string{"INIT_CALL": "log"}, Workers: 40, Log: w, Clock: NewManualClock(t0)})
	if err == nil {
		n := h.Workers()
		h.Close()
		t.Fatalf("New started all %d workers after its context was cancelled at worker 1; want it to stop with the context's error", n)
	}
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "wasmtest: starting worker 2 of 40") {
		t.Errorf("New error = %v; want it to name the worker it stopped at and wrap context.Canceled", err)
	}
	if w.n < -1 {
		t.Errorf("%d more VMs initialized after the cancel; want at most the one being started", -w.n)
	}
}
