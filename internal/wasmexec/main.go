// Command wasmexec runs a wasip1 program in wazero the way `go test -exec`
// expects, with the guest's monotonic clock reading this process's CPU
// time instead of the wall clock. Benchmarks of pure packages compiled to
// wasm then report CPU nanoseconds per op: the cost of the code inside the
// filter's module, which holds on a machine shared with other work, where
// wall-clock figures swing with the load.
//
//	GOOS=wasip1 GOARCH=wasm go test -exec 'go run ./internal/wasmexec' -run '^$' -bench . ./shared/llm
//
// (`make bench-guest` does that.) The root directory is mounted as the
// guest's, the environment is passed through, and the compiled program is
// kept in the same cache directory as the embedded host's
// (wasmtest.DefaultCacheDir).
package main

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
	"github.com/tokentriage/tokentriage/internal/cputime"
	"github.com/tokentriage/tokentriage/wasmtest"
)

func main() { os.Exit(doMain(os.Args[1:], os.Stdout, os.Stderr)) }

func doMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: wasmexec PROGRAM.wasm [ARGS...]")
		return 2
	}
	module, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "wasmexec: %v\n", err)
		return 1
	}
	cache, err := wasmtest.OpenCache(wasmtest.DefaultCacheDir())
	if err != nil {
		fmt.Fprintf(stderr, "wasmexec: %v; compiling in memory\n", err)
		cache, _ = wasmtest.OpenCache(wasmtest.CacheOff)
	}
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache.CompilationCache(module)))
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	compiled, err := rt.CompileModule(ctx, module)
	if err != nil {
		fmt.Fprintf(stderr, "wasmexec: compiling %s: %v\n", args[0], err)
		return 1
	}
	conf := wazero.NewModuleConfig().
		WithStdout(stdout).
		WithStderr(stderr).
		WithStdin(os.Stdin).
		WithRandSource(crand.Reader).
		WithFSConfig(wazero.NewFSConfig().WithDirMount("/", "/")).
		WithSysNanosleep().
		WithSysWalltime().
		WithNanotime(func() int64 { return int64(cputime.Now()) }, 1).
		WithArgs(args...)
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			conf = conf.WithEnv(k, v)
		}
	}
	if _, err := rt.InstantiateModule(ctx, compiled, conf); err != nil {
		var exit *sys.ExitError
		if errors.As(err, &exit) {
			return int(exit.ExitCode())
		}
		fmt.Fprintf(stderr, "wasmexec: %v\n", err)
		return 1
	}
	return 0
}
