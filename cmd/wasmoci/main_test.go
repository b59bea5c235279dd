package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/internal/wasmoci"
)

// make oci: the layout is written, and the pin's three lines are
// rewritten to the image built, which is what ManifestDigest computes from
// the module's SHA-256 and size.
func TestPin(t *testing.T) {
	dir := t.TempDir()
	wasmPath := filepath.Join(dir, "f.wasm")
	os.WriteFile(wasmPath, []byte("\x00asm\x01\x00\x00\x00module"), 0o644)
	yaml := filepath.Join(dir, "wp.yaml")
	os.WriteFile(yaml, []byte("metadata:\n  annotations:\n    tokentriage.io/filter-wasm-sha256: \"\"\n    tokentriage.io/filter-wasm-size: \"\"\nspec:\n  sha256: \"\"\n"), 0o644)
	var out, errb bytes.Buffer
	if code := doMain([]string{"-wasm", wasmPath, "-out", filepath.Join(dir, "oci"), "-tag", "v1", "-pin", yaml}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	b, _ := os.ReadFile(yaml)
	s := string(b)
	var sha, size, pinned string
	for _, l := range strings.Split(s, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), ": ")
		v = strings.Trim(v, `"`)
		switch k {
		case "tokentriage.io/filter-wasm-sha256":
			sha = v
		case "tokentriage.io/filter-wasm-size":
			size = v
		case "sha256":
			pinned = v
		}
	}
	d, err := wasmoci.ManifestDigest(sha, 14)
	if err != nil || size != "14" || "sha256:"+pinned != d || !strings.Contains(out.String(), d) {
		t.Errorf("pinned %q (module %s, %s bytes); ManifestDigest %s, %v; output %s", pinned, sha, size, d, err, out.String())
	}
	// Pinned again: nothing to change.
	out.Reset()
	doMain([]string{"-wasm", wasmPath, "-out", filepath.Join(dir, "oci"), "-pin", yaml}, &out, &errb)
	if !strings.Contains(out.String(), "already pins") {
		t.Errorf("second run: %s", out.String())
	}
	// A manifest without the lines is refused, naming what is missing.
	os.WriteFile(yaml, []byte("spec: {}\n"), 0o644)
	errb.Reset()
	if code := doMain([]string{"-wasm", wasmPath, "-out", filepath.Join(dir, "oci"), "-pin", yaml}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "spec.sha256: 0 lines, want exactly one") {
		t.Errorf("exit %d: %s", code, errb.String())
	}
}
