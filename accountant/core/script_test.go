package core

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// update regenerates the expected output of scenario scripts and golden
// files: go test ./accountant/core -update
var update = flag.Bool("update", false, "rewrite testdata scripts and goldens with the actual output")

// A script (etcd-io/raft style) is a sequence of blocks:
//
//	# comment lines are kept
//	command arg=value ...
//	input lines
//	----
//	expected output
//	(a blank line ends the block)
//
// runScript feeds each command and its input to do and compares the
// output; with -update it rewrites the file with the actual output.
func runScript(t *testing.T, path string, do func(t *testing.T, cmd string, args map[string]string, input []string) string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	f.Close()

	var out strings.Builder
	i := 0
	for i < len(lines) {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			out.WriteString(l + "\n")
			i++
			continue
		}
		start := i + 1
		cmdLine := l
		i++
		var input []string
		for i < len(lines) && lines[i] != "----" {
			input = append(input, lines[i])
			i++
		}
		if i >= len(lines) {
			t.Fatalf("%s:%d: command %q has no ---- line", path, start, cmdLine)
		}
		i++ // ----
		var want []string
		for i < len(lines) && strings.TrimSpace(lines[i]) != "" {
			want = append(want, lines[i])
			i++
		}
		fields := strings.Fields(cmdLine)
		args := map[string]string{}
		for _, a := range fields[1:] {
			k, v, _ := strings.Cut(a, "=")
			args[k] = v
		}
		got := strings.TrimRight(do(t, fields[0], args, input), "\n")
		if !*update && got != strings.Join(want, "\n") {
			t.Errorf("%s:%d: %s\n--- got ---\n%s\n--- want ---\n%s", filepath.Base(path), start, cmdLine, got, strings.Join(want, "\n"))
		}
		out.WriteString(cmdLine + "\n")
		for _, in := range input {
			out.WriteString(in + "\n")
		}
		out.WriteString("----\n" + got + "\n")
	}
	if *update {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func mustArg(t *testing.T, args map[string]string, k string) string {
	t.Helper()
	v, ok := args[k]
	if !ok {
		t.Fatalf("missing argument %s=", k)
	}
	return v
}

var _ = fmt.Sprint
