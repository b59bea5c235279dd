package testkit

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestContextEndsBeforeTheDeadline: under `go test` (whose default
// -timeout gives every test binary a deadline) the context ends ten
// seconds before it, and with the test.
func TestContextEndsBeforeTheDeadline(t *testing.T) {
	ctx := Context(t)
	dl, ok := t.Deadline()
	got, gotOK := ctx.Deadline()
	if ok != gotOK || (ok && !got.Equal(dl.Add(-10*time.Second))) {
		t.Errorf("context deadline %v (%v); test deadline %v (%v)", got, gotOK, dl, ok)
	}
	if ctx.Err() != nil {
		t.Fatalf("ended already: %v", ctx.Err())
	}
}

// TestBufferKeepsEveryWrite writes from several goroutines while reading.
func TestBufferKeepsEveryWrite(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				fmt.Fprintf(&b, "%d.%d\n", i, j)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	for i := range 4 {
		for j := range 100 {
			if line := fmt.Sprintf("%d.%d\n", i, j); !strings.Contains(b.String(), line) {
				t.Fatalf("%q is missing", line)
			}
		}
	}
	if n := strings.Count(b.String(), "\n"); n != 400 {
		t.Errorf("%d lines, want 400", n)
	}
}
