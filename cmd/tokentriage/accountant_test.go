package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAccountantRefusesWithoutAdminToken(t *testing.T) {
	t.Setenv("TT_ADMIN_TOKEN", "")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"accountant", "-c", "testdata/seed004.yaml", "--data", t.TempDir()}, &stdout, &stderr)
	want := "tokentriage accountant: no admin token: set TT_ADMIN_TOKEN or pass --admin-token-file FILE (or --insecure-no-admin to run with admin access to the management API disabled)\n"
	if code != 2 || stderr.String() != want {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

// TestAccountantStartsAndStops runs the command until its context is
// cancelled (as SIGINT or SIGTERM do) and checks it stops cleanly with the
// ledger in place.
func TestAccountantStartsAndStops(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("secret\n"), 0o600)
	data := filepath.Join(dir, "data")
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr bytes.Buffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"accountant", "-c", "testdata/seed004.yaml", "--data", data, "--listen", "127.0.0.1:0", "--admin-token-file", tok}, &stdout, &stderr)
	}()
	// Wait until it has opened its ledger (no timing is asserted).
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(data, "decisions.jsonl")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("the accountant did not start: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "accountant stopped; ledger flushed") {
		t.Errorf("stderr: %s", stderr.String())
	}
}
