// Package testkit holds what the tests of several packages share.
package testkit

import (
	"bytes"
	"os"
	"testing"
)

// Golden checks got against the golden file at path, or, with update (the
// calling package's -update flag), writes got there for review in the
// diff. A missing file fails and says how to create it.
func Golden(tb testing.TB, path string, got []byte, update bool) {
	tb.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		tb.Errorf("%s differs (go test -update rewrites it)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
