package filter_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"
)

// TestBindingHostCallsDoNotAllocate holds filter/proxywasm to what its
// documentation promises (GetSharedDataInto: "a hot loop over small cells
// does not allocate"): in the wasip1 build, the out-parameters of the host
// calls must stay on the stack. Each one that escapes is a heap allocation
// per host call, and a gate-1 request with six limits makes 20 of them
// (three per shared-data get, two per header-map read), a third of the
// allocations the guest makes per request; in the wasm runtime each costs
// about a microsecond with its share of the collector.
//
// The compiler says which locals escape (-gcflags=-m); the test fails on
// every "moved to heap" in the binding's host-call file.
func TestBindingHostCallsDoNotAllocate(t *testing.T) {
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(self), "..")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-gcflags=-m", "-o", os.DevNull, "./filter/proxywasm")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m ./filter/proxywasm for wasip1: %v\n%s", err, out)
	}
	escapes := regexp.MustCompile(`(?m)^\S*hostcall_wasip1\.go:\d+:\d+: moved to heap: \w+$`).FindAll(out, -1)
	for _, e := range escapes {
		t.Errorf("%s", e)
	}
	if len(escapes) > 0 {
		t.Errorf("%d out-parameters of filter/proxywasm's host calls escape to the heap: every call allocates them. "+
			"A VM runs one callback at a time, so they can live in package variables (or one per-VM struct) instead of locals", len(escapes))
	}
}
