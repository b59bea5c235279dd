package filter_test

import (
	"testing"

	"github.com/tokentriage/tokentriage/internal/testwasm"
)

// maxModuleBytes is the size budget of the stripped filter.wasm: DESIGN's
// target is 5,000,000 bytes; what stands between the module and it is in
// RATIONALE.md#why-does-filterwasm-not-link-gjson-or-encodingjson.
const maxModuleBytes = 6_000_000

// TestModuleSize holds filter.wasm, built as `make wasm` builds it, to its
// size budget: a dependency that drags in a large package shows up here.
func TestModuleSize(t *testing.T) {
	if n := len(testwasm.Filter(t)); n > maxModuleBytes {
		t.Fatalf("filter.wasm is %d bytes, over the %d-byte budget: find what grew with `go build -ldflags=-dumpdep` (which packages link) or by building without each new import", n, maxModuleBytes)
	}
}
