package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFile: the file holds the bytes at the path returned; a write
// that cannot be done fails the test.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := WriteFile(t, dir, "a.txt", []byte("x"))
	if b, err := os.ReadFile(p); err != nil || string(b) != "x" || p != filepath.Join(dir, "a.txt") {
		t.Fatalf("%s: %q %v", p, b, err)
	}
	var r recorder
	r.run(func() { WriteFile(&r, filepath.Join(dir, "no", "such", "dir"), "a.txt", nil) })
	if !r.fatal {
		t.Errorf("a write into a missing directory did not fail: %+v", r)
	}
}
