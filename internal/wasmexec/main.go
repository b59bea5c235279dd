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
// (wasmtest.DefaultCacheDir). Imports other than WASI's (the proxy-wasm
// host calls a filter package links) are linked to functions that stop the
// program when called: a test binary of the filter runs its benchmarks
// over the in-memory fakes, without a host.
//
// TT_WASMEXEC_PROFILE=N prints, at exit, the N guest functions with the
// most self time and their call counts (a function listener; the program
// runs several times slower).
package main

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
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
	var prof *profiler
	if top, err := strconv.Atoi(os.Getenv("TT_WASMEXEC_PROFILE")); err == nil && top > 0 {
		prof = newProfiler()
		ctx = experimental.WithFunctionListenerFactory(ctx, prof)
		cache, _ = wasmtest.OpenCache(wasmtest.CacheOff) // listeners change the code
		defer prof.report(stderr, top)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache.CompilationCache(module)))
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	compiled, err := rt.CompileModule(ctx, module)
	if err != nil {
		fmt.Fprintf(stderr, "wasmexec: compiling %s: %v\n", args[0], err)
		return 1
	}
	if err := stubImports(ctx, rt, compiled); err != nil {
		fmt.Fprintf(stderr, "wasmexec: %v\n", err)
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

// stubImports links every function the program imports from a module
// other than WASI's to one that stops it with a message naming the import.
func stubImports(ctx context.Context, rt wazero.Runtime, compiled wazero.CompiledModule) error {
	builders := map[string]wazero.HostModuleBuilder{}
	for _, def := range compiled.ImportedFunctions() {
		mod, name, _ := def.Import()
		if mod == wasi_snapshot_preview1.ModuleName {
			continue
		}
		b, ok := builders[mod]
		if !ok {
			b = rt.NewHostModuleBuilder(mod)
			builders[mod] = b
		}
		what := mod + "." + name
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {
			panic("wasmexec: the program called " + what + ", which this runner does not provide")
		}), def.ParamTypes(), def.ResultTypes()).Export(name)
	}
	for mod, b := range builders {
		if _, err := b.Instantiate(ctx); err != nil {
			return fmt.Errorf("linking the imports of %s: %w", mod, err)
		}
	}
	return nil
}
