package wasmtest

import (
	"context"
	"strings"
	"testing"
)

// TestPhaseCallsTrapAnyOtherImport: with PhaseCalls the host traps on any
// import the guest calls during _initialize or its allocator that the
// lists do not name, whatever cpp-host would allow: a module whose
// _initialize calls the Go runtime's WASI imports cannot start under an
// empty list, and starts under the list of exactly those.
func TestPhaseCallsTrapAnyOtherImport(t *testing.T) {
	_, err := New(context.Background(), Config{Module: conformance(t), PhaseCalls: &PhaseCalls{}})
	if err == nil || !strings.Contains(err.Error(), "initializing the module") || !strings.Contains(err.Error(), "restricted_callback: wasi_snapshot_preview1.") {
		t.Fatalf("an empty Init list: %v", err)
	}
	h := newHost(t, Config{PhaseCalls: &PhaseCalls{Init: GoRuntimeInitCalls}})
	if resp := h.Do(Request{Headers: hdr("X-Mode", "headers")}); resp.Status != 200 {
		t.Fatalf("a request: %d", resp.Status)
	}
	init, _, _ := h.PhaseCallCounts()
	for name := range init {
		if !strings.HasPrefix(name, "wasi_snapshot_preview1.") {
			t.Errorf("_initialize called %s", name)
		}
	}
}
