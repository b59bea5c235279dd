// Package testwasm finds the built filter modules for tests. `make test`
// builds them first and names them in TT_FILTER_WASM and TT_NOOP_WASM; a
// plain `go test` builds them once per test binary into a temporary folder,
// so every test runs against the real .wasm either way.
package testwasm

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	mu    sync.Mutex
	built = map[string][]byte{}
)

// Filter returns the bytes of build/filter.wasm (./cmd/filter).
func Filter(tb testing.TB) []byte { return load(tb, "TT_FILTER_WASM", "./cmd/filter") }

// Noop returns the bytes of the no-op filter (./cmd/noopfilter), built the
// same way as the filter: the floor that benchmarks compare against.
func Noop(tb testing.TB) []byte { return load(tb, "TT_NOOP_WASM", "./cmd/noopfilter") }

// Build compiles the wasip1 reactor in pkg (a path relative to the module
// root, like "./cmd/filter") and returns its bytes.
func Build(tb testing.TB, pkg string) []byte { return load(tb, "", pkg) }

func load(tb testing.TB, env, pkg string) []byte {
	tb.Helper()
	if env != "" {
		if p := os.Getenv(env); p != "" {
			b, err := os.ReadFile(p)
			if err != nil {
				tb.Fatalf("testwasm: %s=%s: %v (run `make wasm`, or unset it to build in the test)", env, p, err)
			}
			return b
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if b, ok := built[pkg]; ok {
		return b
	}
	root := moduleRoot(tb)
	dir, err := os.MkdirTemp("", "tt-wasm-")
	if err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(dir, filepath.Base(pkg)+".wasm")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-buildmode=c-shared", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("testwasm: building %s for wasip1: %v\n%s", pkg, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	built[pkg] = b
	return b
}

func moduleRoot(tb testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("testwasm: cannot locate the module root")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}
