package wasmtest

import (
	"context"
	"testing"

	"github.com/tokentriage/tokentriage/internal/testwasm"
)

// BenchmarkHostStart is what `tokentriage dev` and every test pay to start
// a host of filter.wasm with two worker VMs (compile or load the code, then
// a canary and two VMs instantiated, initialized and configured), beside
// the same start with the code compiled afresh. Each op opens the cache
// anew, as a new process would: "disk" loads what an earlier op stored.
//
//	go test ./wasmtest -run '^$' -bench HostStart -benchtime 5x
func BenchmarkHostStart(b *testing.B) {
	module := testwasm.Filter(b)
	for _, bc := range []struct{ name, dir string }{
		{"memory", CacheOff},
		{"disk", b.TempDir()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			start := func() {
				c, err := OpenCache(bc.dir)
				if err != nil {
					b.Fatal(err)
				}
				h, err := New(context.Background(), Config{Module: module, Cache: c, Workers: 2, PluginConfig: []byte(`{"governance":{"enabled":true,"limits":[]}}`)})
				if err != nil {
					b.Fatal(err)
				}
				h.Close()
			}
			start() // "disk": the one compilation, stored
			b.ResetTimer()
			for b.Loop() {
				start()
			}
		})
	}
}
