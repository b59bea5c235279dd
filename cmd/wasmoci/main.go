// Command wasmoci packages build/filter.wasm as the OCI image an Istio
// WasmPlugin pulls, and pins the image's digest in the WasmPlugin manifests
// that name it (make oci).
//
//	wasmoci -wasm build/filter.wasm -out build/oci -tag v0.1.0 -pin envoy/istio/wasmplugin.yaml
//
// Push the layout with any OCI tool, for example
//
//	crane push build/oci registry.example.com/tokentriage/tokentriage-filter:v0.1.0
//	oras cp --from-oci-layout build/oci:v0.1.0 registry.example.com/tokentriage/tokentriage-filter:v0.1.0
//
// The digest is a function of the module's bytes alone, so the registry
// stores the image under the digest pinned here.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"

	"github.com/tokentriage/tokentriage/internal/wasmoci"
)

func main() { os.Exit(doMain(os.Args[1:], os.Stdout, os.Stderr)) }

func doMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wasmoci", flag.ContinueOnError)
	fs.SetOutput(stderr)
	wasmPath := fs.String("wasm", "build/filter.wasm", "the built filter module")
	out := fs.String("out", "build/oci", "the OCI image layout directory to write (replaced)")
	tag := fs.String("tag", "latest", "the tag index.json gives the image")
	var pins []string
	fs.Func("pin", "a manifest whose WasmPlugin pins the image: its digest and the module's SHA-256 and size are rewritten (repeatable)", func(s string) error {
		pins = append(pins, s)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return 2
	}
	wasm, err := os.ReadFile(*wasmPath)
	if err != nil {
		fmt.Fprintf(stderr, "wasmoci: %v (make wasm builds it)\n", err)
		return 1
	}
	img, err := wasmoci.WriteLayout(*out, wasm, *tag)
	if err != nil {
		fmt.Fprintf(stderr, "wasmoci: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: OCI image layout of %s (%d bytes), tag %s, digest %s\n", *out, *wasmPath, img.WasmSize, *tag, img.Digest)
	for _, p := range pins {
		changed, err := pin(p, img)
		if err != nil {
			fmt.Fprintf(stderr, "wasmoci: pinning %s: %v\n", p, err)
			return 1
		}
		if changed {
			fmt.Fprintf(stdout, "%s: pinned %s\n", p, img.Digest)
		} else {
			fmt.Fprintf(stdout, "%s: already pins %s\n", p, img.Digest)
		}
	}
	return 0
}

// The lines a pinned WasmPlugin carries (envoy/istio/wasmplugin.yaml).
var (
	shaLine  = regexp.MustCompile(`(?m)^(\s+sha256: )"?[0-9a-f]*"?\s*$`)
	wasmLine = regexp.MustCompile(`(?m)^(\s+tokentriage\.io/filter-wasm-sha256: )"?[0-9a-f]*"?\s*$`)
	sizeLine = regexp.MustCompile(`(?m)^(\s+tokentriage\.io/filter-wasm-size: )"?[0-9]*"?\s*$`)
)

// pin rewrites the pinned digest, module SHA-256 and size in file; each
// line must be there exactly once.
func pin(file string, img wasmoci.Image) (bool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return false, err
	}
	s := string(b)
	for _, r := range []struct {
		re    *regexp.Regexp
		value string
		what  string
	}{
		{shaLine, `"` + img.Digest[len("sha256:"):] + `"`, "spec.sha256"},
		{wasmLine, `"` + img.WasmSHA256 + `"`, "the annotation tokentriage.io/filter-wasm-sha256"},
		{sizeLine, `"` + strconv.FormatInt(img.WasmSize, 10) + `"`, "the annotation tokentriage.io/filter-wasm-size"},
	} {
		if n := len(r.re.FindAllStringIndex(s, -1)); n != 1 {
			return false, fmt.Errorf("%s: %d lines, want exactly one", r.what, n)
		}
		s = r.re.ReplaceAllString(s, "${1}"+r.value)
	}
	if s == string(b) {
		return false, nil
	}
	return true, os.WriteFile(file, []byte(s), 0o644)
}
