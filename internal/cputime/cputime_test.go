package cputime

import "testing"

var sink int

// TestNowCountsWork: a fixed amount of work moves the clock forward.
func TestNowCountsWork(t *testing.T) {
	if !Supported() {
		t.Log("no process CPU clock on this platform")
		return
	}
	t0 := Now()
	for i := 0; i < 50_000_000; i++ {
		sink += i
	}
	if spent := Now() - t0; spent <= 0 {
		t.Fatalf("50M additions took %v of CPU", spent)
	}
}
