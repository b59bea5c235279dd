package govern_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/internal/configfile"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
)

var update = flag.Bool("update", false, "rewrite the expected half of testdata/compile/*.golden")

// goldenSep separates a fixture's input config from its expected output.
const goldenSep = "----\n"

// TestCompileGolden runs every fixture under testdata/compile: the YAML
// above the "----" line is decoded and compiled, and what validate would
// print (the compiled plan, or every problem one per line) must equal what
// is below it.
func TestCompileGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/compile/*.golden")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".golden"), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			input, want, ok := strings.Cut(string(b), goldenSep)
			if !ok {
				t.Fatalf("%s: no %q line", f, strings.TrimSpace(goldenSep))
			}
			got := compileOutput(t, input)
			if *update {
				if err := os.WriteFile(f, []byte(input+goldenSep+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != want {
				t.Errorf("%s: output differs\n--- got\n%s--- want\n%s", f, got, want)
			}
			wantErr := strings.HasPrefix(filepath.Base(f), "err_")
			if gotErr := !strings.HasPrefix(got, "enabled:"); gotErr != wantErr {
				t.Errorf("%s: fixtures named err_* must fail and only they (failed: %t)", f, gotErr)
			}
		})
	}
}

// compileOutput decodes and compiles a config the way validate does.
func compileOutput(t *testing.T, input string) string {
	t.Helper()
	file, err := configfile.Parse("fixture.yaml", []byte(input))
	if err != nil {
		var ps config.Problems
		if errors.As(err, &ps) {
			return lines(govern.FromConfig(ps))
		}
		return err.Error() + "\n"
	}
	plan, err := govern.Compile(file.Governance)
	if err != nil {
		var ps govern.Problems
		if !errors.As(err, &ps) {
			t.Fatalf("Compile error is %T, want govern.Problems", err)
		}
		return lines(ps)
	}
	if _, probs := plan.Arm(govern.Runtime{}); len(probs) > 0 {
		t.Fatalf("arming with no runtime plane: %v", govern.Problems(probs))
	}
	return plan.Describe()
}

func lines(ps govern.Problems) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.String())
		b.WriteByte('\n')
	}
	return b.String()
}
