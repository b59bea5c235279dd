package testkit

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what a check reports instead of
// failing the test that runs it.
type recorder struct {
	testing.TB
	errors []string
	fatal  bool
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, format)
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.errors = append(r.errors, format)
	r.fatal = true
	runtime.Goexit()
}
func (r *recorder) Fatal(args ...any) {
	r.fatal = true
	runtime.Goexit()
}

// run runs f as a test's goroutine, which Fatal ends, and returns when it
// has ended.
func (r *recorder) run(f func()) *recorder {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
	return r
}

// TestGolden: the same bytes pass, other bytes fail, a missing file fails
// and says how to create it, and update writes the file that then passes.
func TestGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.golden")
	var r recorder
	r.run(func() { Golden(&r, path, []byte("a\n"), false) })
	if !r.fatal || !strings.Contains(r.errors[0], "-update to create it") {
		t.Fatalf("missing file: %+v", r)
	}
	r = recorder{}
	r.run(func() { Golden(&r, path, []byte("a\n"), true) })
	if b, err := os.ReadFile(path); err != nil || string(b) != "a\n" || len(r.errors) > 0 || r.fatal {
		t.Fatalf("update wrote %q, %v; reported %+v", b, err, r)
	}
	r = recorder{}
	r.run(func() { Golden(&r, path, []byte("a\n"), false) })
	if len(r.errors) > 0 || r.fatal {
		t.Fatalf("same bytes reported %+v", r)
	}
	r.run(func() { Golden(&r, path, []byte("b\n"), false) })
	if len(r.errors) != 1 || r.fatal {
		t.Fatalf("other bytes reported %+v", r)
	}
}
