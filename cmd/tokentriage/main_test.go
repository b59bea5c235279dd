package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the expected half of testdata/*.golden")

// TestCommands runs each testdata/*.golden case: its first line is the
// command line (after "tokentriage"), and what follows "----" is the exit
// status, stdout and stderr that doMain must produce.
func TestCommands(t *testing.T) {
	files, err := filepath.Glob("testdata/*.golden")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".golden"), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			cmdline, want, ok := strings.Cut(string(b), "\n----\n")
			if !ok {
				t.Fatalf("%s: no ---- line", f)
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), strings.Fields(cmdline), &stdout, &stderr)
			got := fmt.Sprintf("exit %d\n-- stdout --\n%s-- stderr --\n%s", code, stdout.String(), stderr.String())
			if *update {
				if err := os.WriteFile(f, []byte(cmdline+"\n----\n"+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != want {
				t.Errorf("tokentriage %s:\n--- got\n%s--- want\n%s", cmdline, got, want)
			}
		})
	}
}

// TestDoMain checks the process entry point end to end once.
func TestDoMain(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := doMain([]string{"validate", "-c", "testdata/seed004.yaml"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	if got := stdout.String(); got != "ok: 5 nodes, 4 limits, 5 instances\n" {
		t.Errorf("stdout %q", got)
	}
}

// TestEveryCommandHasHelp holds every command in the table to --help.
func TestEveryCommandHasHelp(t *testing.T) {
	for _, c := range commands {
		var stdout, stderr bytes.Buffer
		args := append(strings.Fields(c.name), "--help")
		if code := run(context.Background(), args, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "Usage: tokentriage "+c.name) {
			t.Errorf("%s --help: exit %d, stdout %q, stderr %q", c.name, code, stdout.String(), stderr.String())
		}
		if c.summary == "" {
			t.Errorf("%s has no summary", c.name)
		}
	}
}
