package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
)

func TestClosest(t *testing.T) {
	names := commandNames()
	for word, want := range map[string]string{
		"spnd": "spend", "sepnd": "spend", "vrsion": "version", "accountent": "accountant", "govern previw": "govern preview",
		"keys mnt": "keys mint", "valdate": "validate", "dve": "dev", "frobnicate": "",
	} {
		if got := strings.Join(closest(word, names), ","); got != want {
			t.Errorf("closest(%q) = %q, want %q", word, got, want)
		}
	}
	if got := strings.Join(suggestCommand([]string{"govern", "review"}), ","); got != "govern preview" {
		t.Errorf("govern review: %q", got)
	}
	if got := strings.Join(suggestCommand([]string{"key", "mint"}), ","); got != "keys mint" {
		t.Errorf("key mint: %q", got)
	}
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"spend", "spned", 1}, {"owner", "ownr", 1}} {
		if got := editDistance(c.a, c.b); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

// TestVersion: tokentriage version and --version print the same line,
// naming the Go version and the platform.
func TestVersion(t *testing.T) {
	var lines []string
	for _, args := range [][]string{{"version"}, {"--version"}, {"-V"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 0 || stderr.Len() > 0 {
			t.Fatalf("%v: exit %d %s", args, code, stderr.String())
		}
		lines = append(lines, stdout.String())
	}
	want := " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if !strings.HasPrefix(lines[0], "tokentriage ") || !strings.HasSuffix(lines[0], want) || lines[1] != lines[0] || lines[2] != lines[0] {
		t.Errorf("version lines %q", lines)
	}
	version = "v1.2.3"
	t.Cleanup(func() { version = "" })
	if got := versionLine(); !strings.HasPrefix(got, "tokentriage v1.2.3 ") {
		t.Errorf("with a release set at link time: %q", got)
	}
}
