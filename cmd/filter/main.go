// Command filter is the tokentriage governance filter, built as a proxy-wasm
// module with the standard Go toolchain:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o build/filter.wasm ./cmd/filter
//
// It only registers the VM context; everything else is in package filter.
package main

import (
	"github.com/tokentriage/tokentriage/filter"
	"github.com/tokentriage/tokentriage/filter/proxywasm"
)

// init registers the VM context. It makes no host call: Envoy runs
// _initialize in a restricted mode where host calls trap.
func init() { proxywasm.SetVMContext(filter.NewVMContext()) }

// main never runs in a reactor module; the Go toolchain requires it.
func main() {}
