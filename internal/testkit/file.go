package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFile writes b to name in dir (a test's temporary directory, say)
// and returns the file's path; a failed write fails the test.
func WriteFile(tb testing.TB, dir, name string, b []byte) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}
