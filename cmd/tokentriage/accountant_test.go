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

// TestAccountantRefusesWithoutInternalToken: the internal plane is never
// open; without a token (or with the admin token as the internal one) the
// accountant does not start and says what to set.
func TestAccountantRefusesWithoutInternalToken(t *testing.T) {
	t.Setenv("TT_ADMIN_TOKEN", "admin")
	for _, c := range []struct {
		env  string
		args []string
		want string
	}{
		{"", nil, "tokentriage accountant: no internal token: set TT_ACCOUNTANT_TOKEN or pass --internal-token-file FILE, and give the filters the same token (the plugin configuration's accountant.token, or accountant.token_env naming a variable that holds it)\n"},
		{"admin", nil, "tokentriage accountant: the internal token is the admin token; use two different tokens (the filters hold the internal one, which must not open the management API)\n"},
		{"x", []string{"--internal-token-file", filepath.Join(t.TempDir(), "absent")}, "tokentriage accountant: cannot read the internal token: open "},
	} {
		t.Setenv("TT_ACCOUNTANT_TOKEN", c.env)
		var stdout, stderr bytes.Buffer
		args := append([]string{"accountant", "-c", "testdata/seed004.yaml", "--data", t.TempDir()}, c.args...)
		code := run(context.Background(), args, &stdout, &stderr)
		if code != 2 || !strings.HasPrefix(stderr.String(), c.want) {
			t.Errorf("TT_ACCOUNTANT_TOKEN=%q %v: exit %d, stderr %q", c.env, c.args, code, stderr.String())
		}
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
	t.Setenv("TT_ACCOUNTANT_TOKEN", "internal")
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

// TestAlertFlags: --alert-format and --spend-report are checked before
// anything starts, on accountant and dev alike.
func TestAlertFlags(t *testing.T) {
	t.Setenv("TT_ADMIN_TOKEN", "admin")
	t.Setenv("TT_ACCOUNTANT_TOKEN", "internal")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--alert-format", "discord", "--alert-webhook", "http://127.0.0.1:1/hook"}, `--alert-format discord: alert format "discord" is not one of json, slack, teams`},
		{[]string{"--alert-format", "slack"}, "--alert-format slack shapes the alert webhook's posts: give --alert-webhook URL too"},
		{[]string{"--spend-report", "daily"}, "--spend-report daily posts to the alert webhook: give --alert-webhook URL too"},
		{[]string{"--spend-report", "weekly", "--alert-webhook", "http://127.0.0.1:1/hook"}, "--spend-report weekly: the report is daily (or leave the flag out)"},
	} {
		for _, cmd := range []string{"accountant", "dev"} {
			var stdout, stderr bytes.Buffer
			args := append([]string{cmd, "-c", "testdata/seed004.yaml", "--data", t.TempDir()}, c.args...)
			code := run(context.Background(), args, &stdout, &stderr)
			if want := "tokentriage " + cmd + ": " + c.want + "\n"; code != 2 || stderr.String() != want {
				t.Errorf("%v: exit %d %q\nwant 2 %q", args, code, stderr.String(), want)
			}
		}
	}
}
