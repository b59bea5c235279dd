package proxywasm_test

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"
	"github.com/tokentriage/tokentriage/internal/testwasm"
)

// The imports Envoy >= 1.33 provides (shared/proxy-wasm.md 1.3 and 2.1),
// with their signatures: "i" is i32, "I" is i64, "->" separates results.
// An import outside this list, or with another signature, fails linking in
// Envoy and no VM is created.
var envoyImports = map[string]string{
	"env.proxy_log":                          "iii->i",
	"env.proxy_get_log_level":                "i->i",
	"env.proxy_get_current_time_nanoseconds": "i->i",
	"env.proxy_set_tick_period_milliseconds": "i->i",
	"env.proxy_set_effective_context":        "i->i",
	"env.proxy_done":                         "->i",
	"env.proxy_get_buffer_bytes":             "iiiii->i",
	"env.proxy_set_buffer_bytes":             "iiiii->i",
	"env.proxy_get_buffer_status":            "iii->i",
	"env.proxy_get_header_map_pairs":         "iii->i",
	"env.proxy_set_header_map_pairs":         "iii->i",
	"env.proxy_get_header_map_size":          "ii->i",
	"env.proxy_get_header_map_value":         "iiiii->i",
	"env.proxy_add_header_map_value":         "iiiii->i",
	"env.proxy_replace_header_map_value":     "iiiii->i",
	"env.proxy_remove_header_map_value":      "iii->i",
	"env.proxy_continue_stream":              "i->i",
	"env.proxy_close_stream":                 "i->i",
	"env.proxy_get_status":                   "iii->i",
	"env.proxy_send_local_response":          "iiiiiiii->i",
	"env.proxy_http_call":                    "iiiiiiiiii->i",
	"env.proxy_get_shared_data":              "iiiii->i",
	"env.proxy_set_shared_data":              "iiiii->i",
	"env.proxy_register_shared_queue":        "iii->i",
	"env.proxy_resolve_shared_queue":         "iiiii->i",
	"env.proxy_enqueue_shared_queue":         "iii->i",
	"env.proxy_dequeue_shared_queue":         "iii->i",
	"env.proxy_define_metric":                "iiii->i",
	"env.proxy_increment_metric":             "iI->i",
	"env.proxy_record_metric":                "iI->i",
	"env.proxy_get_metric":                   "ii->i",
	"env.proxy_get_property":                 "iiii->i",
	"env.proxy_set_property":                 "iiii->i",
	"env.proxy_call_foreign_function":        "iiiiii->i",

	"wasi_snapshot_preview1.args_get":            "ii->i",
	"wasi_snapshot_preview1.args_sizes_get":      "ii->i",
	"wasi_snapshot_preview1.environ_get":         "ii->i",
	"wasi_snapshot_preview1.environ_sizes_get":   "ii->i",
	"wasi_snapshot_preview1.clock_time_get":      "iIi->i",
	"wasi_snapshot_preview1.random_get":          "ii->i",
	"wasi_snapshot_preview1.proc_exit":           "i->",
	"wasi_snapshot_preview1.sched_yield":         "->i",
	"wasi_snapshot_preview1.poll_oneoff":         "iiii->i",
	"wasi_snapshot_preview1.fd_write":            "iiii->i",
	"wasi_snapshot_preview1.fd_read":             "iiii->i",
	"wasi_snapshot_preview1.fd_seek":             "iIii->i",
	"wasi_snapshot_preview1.fd_close":            "i->i",
	"wasi_snapshot_preview1.fd_fdstat_get":       "ii->i",
	"wasi_snapshot_preview1.fd_fdstat_set_flags": "ii->i",
	"wasi_snapshot_preview1.fd_prestat_get":      "ii->i",
	"wasi_snapshot_preview1.fd_prestat_dir_name": "iii->i",
}

// The exports a proxy-wasm host looks for, with their signatures.
var wantExports = map[string]string{
	"_initialize":                 "->",
	"proxy_abi_version_0_2_1":     "->",
	"proxy_on_memory_allocate":    "i->i",
	"proxy_on_context_create":     "ii->",
	"proxy_on_vm_start":           "ii->i",
	"proxy_on_configure":          "ii->i",
	"proxy_on_tick":               "i->",
	"proxy_on_queue_ready":        "ii->",
	"proxy_on_request_headers":    "iii->i",
	"proxy_on_request_body":       "iii->i",
	"proxy_on_request_trailers":   "ii->i",
	"proxy_on_response_headers":   "iii->i",
	"proxy_on_response_body":      "iii->i",
	"proxy_on_response_trailers":  "ii->i",
	"proxy_on_http_call_response": "iiiii->",
	"proxy_on_log":                "i->",
	"proxy_on_done":               "i->i",
	"proxy_on_delete":             "i->",
}

func signature(params, results []api.ValueType) string {
	enc := func(ts []api.ValueType) string {
		var b strings.Builder
		for _, t := range ts {
			switch t {
			case api.ValueTypeI32:
				b.WriteByte('i')
			case api.ValueTypeI64:
				b.WriteByte('I')
			default:
				b.WriteByte('?')
			}
		}
		return b.String()
	}
	return enc(params) + "->" + enc(results)
}

// TestModuleImportsAndExports builds cmd/noopfilter, and a filter that
// references the binding's whole API, for wasip1 and checks with wazero's
// compiler that each exports what a proxy-wasm host calls and imports only
// what Envoy >= 1.33 provides, with Envoy's signatures.
func TestModuleImportsAndExports(t *testing.T) {
	modules := []struct {
		name string
		wasm func(testing.TB) []byte
		// env imports the module must have: the noop filter's are the
		// panic path (log, effective context, local reply, close stream);
		// allcalls has every one the API uses (all the declared ones but
		// proxy_get_buffer_status and proxy_get_header_map_size, which no
		// API function calls, so the linker drops them).
		env int
	}{
		{"noopfilter", testwasm.Noop, 4},
		{"allcalls", func(tb testing.TB) []byte { return testwasm.Build(tb, "./filter/proxywasm/testdata/allcalls") }, 26},
	}
	for _, mod := range modules {
		t.Run(mod.name, func(t *testing.T) {
			checkModule(t, mod.wasm(t), mod.env)
		})
	}
}

func checkModule(t *testing.T, wasm []byte, wantEnv int) {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	defer r.Close(ctx)
	m, err := r.CompileModule(ctx, wasm)
	if err != nil {
		t.Fatalf("compiling the module: %v", err)
	}
	var imports []string
	env := 0
	for _, f := range m.ImportedFunctions() {
		mod, name, _ := f.Import()
		key := mod + "." + name
		if mod == "env" {
			env++
		}
		imports = append(imports, key+" "+signature(f.ParamTypes(), f.ResultTypes()))
		want, ok := envoyImports[key]
		if !ok {
			t.Errorf("import %s is not one Envoy >= 1.33 provides", key)
		} else if got := signature(f.ParamTypes(), f.ResultTypes()); got != want {
			t.Errorf("import %s has signature %s, Envoy's is %s", key, got, want)
		}
	}
	if env != wantEnv {
		t.Errorf("%d env imports, want %d", env, wantEnv)
	}
	exports := m.ExportedFunctions()
	var names []string
	for name := range exports {
		names = append(names, name)
	}
	slices.Sort(names)
	for name, want := range wantExports {
		f, ok := exports[name]
		if !ok {
			t.Errorf("missing export %s", name)
			continue
		}
		if got := signature(f.ParamTypes(), f.ResultTypes()); got != want {
			t.Errorf("export %s has signature %s, want %s", name, got, want)
		}
	}
	for _, name := range []string{"main", "_start", "malloc"} {
		if _, ok := exports[name]; ok {
			t.Errorf("export %s must not exist (the host would call it)", name)
		}
	}
	if _, ok := m.ExportedMemories()["memory"]; !ok {
		t.Error("missing export memory")
	}
	t.Logf("imports:\n  %s", strings.Join(imports, "\n  "))
	t.Logf("exports: %s", strings.Join(names, " "))
}

// stubHost is a minimal env module: every proxy_* import the module has
// answers OK, proxy_log and proxy_send_local_response are recorded, and
// any call during _initialize is recorded too (Envoy traps those).
type stubHost struct {
	initializing bool
	initCalls    []string
	logs         []string
	replies      []stubReply
}

type stubReply struct {
	status  uint32
	body    string
	headers [][2]string
}

func (s *stubHost) instantiate(ctx context.Context, t testing.TB, r wazero.Runtime, m wazero.CompiledModule) {
	b := r.NewHostModuleBuilder("env")
	for _, f := range m.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod != "env" {
			continue
		}
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, mem api.Module, stack []uint64) {
			if s.initializing && name != "proxy_log" {
				s.initCalls = append(s.initCalls, name)
			}
			read := func(ptr, size uint64) string {
				b, _ := mem.Memory().Read(uint32(ptr), uint32(size))
				return string(b)
			}
			switch name {
			case "proxy_log":
				s.logs = append(s.logs, read(stack[1], stack[2]))
			case "proxy_send_local_response":
				hs, err := abi.DecodePairs([]byte(read(stack[5], stack[6])))
				if err != nil {
					t.Errorf("local reply headers: %v", err)
				}
				s.replies = append(s.replies, stubReply{uint32(stack[0]), read(stack[3], stack[4]), hs})
			}
			if len(f.ResultTypes()) == 1 {
				stack[0] = 0
			}
		}), f.ParamTypes(), f.ResultTypes()).Export(name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		t.Fatalf("instantiating the stub env: %v", err)
	}
}

// wasmVM instantiates a built filter on wazero with stock WASI and the
// stub env, running _initialize.
func wasmVM(t *testing.T, wasm []byte) (context.Context, api.Module, *stubHost) {
	return wasmVMB(t, wasm)
}

func wasmVMB(t testing.TB, wasm []byte) (context.Context, api.Module, *stubHost) {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	t.Cleanup(func() { r.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	m, err := r.CompileModule(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	host := &stubHost{initializing: true}
	host.instantiate(ctx, t, r, m)
	mod, err := r.InstantiateModule(ctx, m, wazero.NewModuleConfig().
		WithStartFunctions("_initialize").WithStdout(io.Discard).WithStderr(io.Discard))
	if err != nil {
		t.Fatalf("instantiating: %v", err)
	}
	host.initializing = false
	if len(host.initCalls) > 0 {
		t.Errorf("host calls during _initialize (Envoy traps them): %v", host.initCalls)
	}
	return ctx, mod, host
}

func call(t *testing.T, ctx context.Context, mod api.Module, name string, args ...uint64) uint64 {
	t.Helper()
	res, err := mod.ExportedFunction(name).Call(ctx, args...)
	if err != nil {
		t.Fatalf("%s%v trapped: %v", name, args, err)
	}
	if len(res) == 0 {
		return 0
	}
	return res[0]
}

// TestNoopModuleLifecycle drives the real noop.wasm through a stream's
// whole life, unknown ids included, and allocate(0).
func TestNoopModuleLifecycle(t *testing.T) {
	ctx, mod, host := wasmVM(t, testwasm.Noop(t))
	for _, size := range []uint64{0, 1, 4096} {
		p := call(t, ctx, mod, "proxy_on_memory_allocate", size)
		if p == 0 {
			t.Fatalf("proxy_on_memory_allocate(%d) = 0", size)
		}
		if size > 0 && !mod.Memory().Write(uint32(p), make([]byte, size)) {
			t.Fatalf("block from proxy_on_memory_allocate(%d) is outside memory", size)
		}
	}
	call(t, ctx, mod, "proxy_on_context_create", 1, 0)
	if call(t, ctx, mod, "proxy_on_vm_start", 1, 0) != 1 || call(t, ctx, mod, "proxy_on_configure", 1, 0) != 1 {
		t.Fatal("vm_start or configure failed")
	}
	for id := uint64(2); id < 5; id++ {
		call(t, ctx, mod, "proxy_on_context_create", id, 1)
		for _, cb := range []string{"proxy_on_request_headers", "proxy_on_request_body", "proxy_on_response_headers", "proxy_on_response_body"} {
			if a := call(t, ctx, mod, cb, id, 3, 1); a != 0 {
				t.Errorf("%s = %d, want Continue", cb, a)
			}
		}
		call(t, ctx, mod, "proxy_on_log", id)
		if call(t, ctx, mod, "proxy_on_done", id) != 1 {
			t.Error("proxy_on_done(stream) = false")
		}
		call(t, ctx, mod, "proxy_on_delete", id)
	}
	// Ids the module never saw, or already deleted.
	for _, id := range []uint64{2, 99} {
		if a := call(t, ctx, mod, "proxy_on_request_headers", id, 1, 1); a != 0 {
			t.Errorf("unknown context %d: action %d", id, a)
		}
		call(t, ctx, mod, "proxy_on_http_call_response", 1, 4, 0, 0, 0)
		call(t, ctx, mod, "proxy_on_log", id)
		call(t, ctx, mod, "proxy_on_delete", id)
	}
	call(t, ctx, mod, "proxy_on_tick", 1)
	if call(t, ctx, mod, "proxy_on_done", 1) != 1 {
		t.Error("proxy_on_done(root) = false")
	}
	call(t, ctx, mod, "proxy_on_delete", 1)
	if len(host.replies) != 0 || len(host.logs) != 0 {
		t.Errorf("the noop filter replied %v or logged %q", host.replies, host.logs)
	}
}

// TestPanicRecoveredInWasm: a panic inside the real module is recovered
// (no trap), answered with the 500 JSON reply and logged, and the VM keeps
// serving.
func TestPanicRecoveredInWasm(t *testing.T) {
	ctx, mod, host := wasmVM(t, testwasm.Build(t, "./filter/proxywasm/testdata/panicfilter"))
	call(t, ctx, mod, "proxy_on_context_create", 1, 0)
	call(t, ctx, mod, "proxy_on_vm_start", 1, 0)
	call(t, ctx, mod, "proxy_on_configure", 1, 0)
	call(t, ctx, mod, "proxy_on_context_create", 2, 1)
	if a := call(t, ctx, mod, "proxy_on_request_headers", 2, 13, 1); a != uint64(abi.ActionPause) {
		t.Fatalf("action after a panic = %d, want Pause", a)
	}
	if len(host.replies) != 1 {
		t.Fatalf("local replies = %+v", host.replies)
	}
	rep := host.replies[0]
	if rep.status != 500 || rep.body != panicBody || !slices.Equal(rep.headers, [][2]string{{"content-type", "application/json"}}) {
		t.Errorf("reply = %+v", rep)
	}
	if len(host.logs) != 1 || !strings.Contains(host.logs[0], "recovered panic in proxy_on_request_headers (context 2): assignment to entry in nil map") {
		t.Errorf("logs = %q", host.logs)
	}
	call(t, ctx, mod, "proxy_on_context_create", 3, 1)
	if a := call(t, ctx, mod, "proxy_on_request_headers", 3, 2, 1); a != uint64(abi.ActionContinue) {
		t.Errorf("next stream action = %d, want Continue", a)
	}
}
