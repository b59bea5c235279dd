package wasmtest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// hostFunc is one import the host provides. The table below is the single
// list of what Envoy ≥ 1.33 links (shared/proxy-wasm.md 1.3 and 2.1): the host
// registers exactly these, and CheckImports checks a module against them.
type hostFunc struct {
	module  string
	name    string
	params  []api.ValueType
	results []api.ValueType
	allow   uint8 // restriction modes in which the call is allowed
	abi021  bool  // registered only for modules exporting proxy_abi_version_0_2_1
	fn      func(v *vm, stack []uint64)
}

const (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

func ints(n int) []api.ValueType {
	t := make([]api.ValueType, n)
	for i := range t {
		t[i] = i32
	}
	return t
}

var one = []api.ValueType{i32}

const (
	wasiModule = "wasi_snapshot_preview1"
	wasiOld    = "wasi_unstable"
	envModule  = "env"
)

// hostFuncs is built once; the env part is in the order of the fact sheet.
var hostFuncs = func() []hostFunc {
	env := func(name string, params []api.ValueType, fn func(*vm, []uint64)) hostFunc {
		return hostFunc{module: envModule, name: name, params: params, results: one, fn: fn}
	}
	fs := []hostFunc{
		{module: envModule, name: "proxy_log", params: ints(3), results: one, allow: restrictInit | restrictAlloc, fn: hostLog},
		{module: envModule, name: "proxy_get_log_level", params: ints(1), results: one, abi021: true, fn: hostGetLogLevel},
		env("proxy_get_current_time_nanoseconds", ints(1), hostGetCurrentTime),
		env("proxy_set_tick_period_milliseconds", ints(1), hostSetTickPeriod),
		env("proxy_set_effective_context", ints(1), hostSetEffectiveContext),
		env("proxy_done", nil, hostDone),
		env("proxy_get_buffer_bytes", ints(5), hostGetBufferBytes),
		env("proxy_set_buffer_bytes", ints(5), hostSetBufferBytes),
		env("proxy_get_buffer_status", ints(3), hostGetBufferStatus),
		env("proxy_get_header_map_pairs", ints(3), hostGetHeaderMapPairs),
		env("proxy_set_header_map_pairs", ints(3), hostSetHeaderMapPairs),
		env("proxy_get_header_map_size", ints(2), hostGetHeaderMapSize),
		env("proxy_get_header_map_value", ints(5), hostGetHeaderMapValue),
		env("proxy_add_header_map_value", ints(5), hostAddHeaderMapValue),
		env("proxy_replace_header_map_value", ints(5), hostReplaceHeaderMapValue),
		env("proxy_remove_header_map_value", ints(3), hostRemoveHeaderMapValue),
		env("proxy_continue_stream", ints(1), hostContinueStream),
		env("proxy_close_stream", ints(1), hostCloseStream),
		env("proxy_get_status", ints(3), hostGetStatus),
		env("proxy_send_local_response", ints(8), hostSendLocalResponse),
		env("proxy_http_call", ints(10), hostHTTPCall),
		env("proxy_grpc_call", ints(12), hostGrpcUnsupported),
		env("proxy_grpc_stream", ints(9), hostGrpcUnsupported),
		env("proxy_grpc_send", ints(4), hostGrpcUnsupported),
		env("proxy_grpc_cancel", ints(1), hostGrpcUnsupported),
		env("proxy_grpc_close", ints(1), hostGrpcUnsupported),
		env("proxy_get_shared_data", ints(5), hostGetSharedData),
		env("proxy_set_shared_data", ints(5), hostSetSharedData),
		env("proxy_register_shared_queue", ints(3), hostRegisterQueue),
		env("proxy_resolve_shared_queue", ints(5), hostResolveQueue),
		env("proxy_enqueue_shared_queue", ints(3), hostEnqueueQueue),
		env("proxy_dequeue_shared_queue", ints(3), hostDequeueQueue),
		env("proxy_define_metric", ints(4), hostDefineMetric),
		env("proxy_increment_metric", []api.ValueType{i32, i64}, hostIncrementMetric),
		env("proxy_record_metric", []api.ValueType{i32, i64}, hostRecordMetric),
		env("proxy_get_metric", ints(2), hostGetMetric),
		env("proxy_get_property", ints(4), hostGetProperty),
		env("proxy_set_property", ints(4), hostSetProperty),
		env("proxy_call_foreign_function", ints(6), hostCallForeignFunction),
		env("pthread_equal", ints(2), func(v *vm, s []uint64) {
			if uint32(s[0]) == uint32(s[1]) {
				s[0] = 1
			} else {
				s[0] = 0
			}
		}),
		{module: envModule, name: "emscripten_notify_memory_growth", params: ints(1), allow: restrictInit | restrictAlloc, fn: func(*vm, []uint64) {}},
	}
	const initOK = restrictInit
	wasi := []hostFunc{
		{name: "fd_write", params: ints(4), results: one, allow: restrictInit | restrictAlloc, fn: wasiFdWrite},
		{name: "fd_read", params: ints(4), results: one, fn: wasiErrno(errnoNosys)},
		{name: "fd_seek", params: []api.ValueType{i32, i64, i32, i32}, results: one, fn: wasiErrno(errnoSuccess)},
		{name: "fd_close", params: ints(1), results: one, fn: wasiErrno(errnoSuccess)},
		{name: "fd_fdstat_get", params: ints(2), results: one, allow: initOK, fn: wasiFdFdstatGet},
		{name: "fd_fdstat_set_flags", params: ints(2), results: one, allow: initOK, fn: wasiErrno(errnoNosys)},
		{name: "fd_prestat_get", params: ints(2), results: one, allow: initOK, fn: wasiErrno(errnoBadf)},
		{name: "fd_prestat_dir_name", params: ints(3), results: one, allow: initOK, fn: wasiErrno(errnoBadf)},
		{name: "path_open", params: []api.ValueType{i32, i32, i32, i32, i32, i64, i64, i32, i32}, results: one, fn: wasiErrno(errnoNoent)},
		{name: "environ_get", params: ints(2), results: one, allow: initOK, fn: wasiEnvironGet},
		{name: "environ_sizes_get", params: ints(2), results: one, allow: initOK, fn: wasiEnvironSizesGet},
		{name: "args_get", params: ints(2), results: one, allow: initOK, fn: wasiErrno(errnoSuccess)},
		{name: "args_sizes_get", params: ints(2), results: one, allow: initOK, fn: wasiArgsSizesGet},
		{name: "clock_time_get", params: []api.ValueType{i32, i64, i32}, results: one, allow: restrictInit | restrictAlloc, fn: wasiClockTimeGet},
		{name: "random_get", params: ints(2), results: one, allow: initOK, fn: wasiRandomGet},
		{name: "proc_exit", params: ints(1), fn: wasiProcExit},
		{name: "sched_yield", params: nil, results: one, fn: wasiErrno(errnoSuccess)},
		{name: "poll_oneoff", params: ints(4), results: one, fn: wasiPollOneoff},
	}
	for _, m := range []string{wasiModule, wasiOld} {
		for _, f := range wasi {
			f.module = m
			fs = append(fs, f)
		}
	}
	return fs
}()

// register instantiates the env and WASI host modules in rt. proxy_get_log_level
// is included only for ABI 0.2.1 modules, as cpp-host's registerCallbacks does.
func registerHostModules(ctx context.Context, rt wazero.Runtime, abi021 bool) error {
	builders := map[string]wazero.HostModuleBuilder{}
	for i := range hostFuncs {
		hf := &hostFuncs[i]
		if hf.abi021 && !abi021 {
			continue
		}
		b := builders[hf.module]
		if b == nil {
			b = rt.NewHostModuleBuilder(hf.module)
			builders[hf.module] = b
		}
		b.NewFunctionBuilder().
			WithGoModuleFunction(wrapHostFunc(hf), hf.params, hf.results).
			WithName(hf.name).
			Export(hf.name)
	}
	names := make([]string, 0, len(builders))
	for n := range builders {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, err := builders[n].Instantiate(ctx); err != nil {
			return fmt.Errorf("wasmtest: registering host module %s: %w", n, err)
		}
	}
	return nil
}

func wrapHostFunc(hf *hostFunc) api.GoModuleFunction {
	name := hf.module + "." + hf.name
	allow := hf.allow
	fn := hf.fn
	return api.GoModuleFunc(func(ctx context.Context, _ api.Module, stack []uint64) {
		v := vmOf(ctx)
		if v.restrict != 0 {
			if !v.phaseAllowed(name, allow) {
				v.fail(restrictedWhere(v.restrict), &restrictedError{call: name})
				panic(&trapError{msg: v.failure})
			}
			v.notePhaseCall(name)
		}
		v.total.HostCalls++
		v.counts.HostCalls++
		fn(v, stack)
	})
}

func restrictedWhere(mode uint8) string {
	if mode&restrictAlloc != 0 {
		return "proxy_on_memory_allocate"
	}
	return "_initialize"
}

// Import is one function a module imports.
type Import struct {
	Module, Name string
	Params       []api.ValueType
	Results      []api.ValueType
}

func (i Import) String() string { return i.Module + "." + i.Name }

// ModuleImports compiles module and lists the functions it imports.
func ModuleImports(ctx context.Context, module []byte) ([]Import, error) {
	rt, cm, err := compileModule(ctx, nil, module)
	if err != nil {
		return nil, err
	}
	defer rt.Close(ctx)
	var out []Import
	for _, d := range cm.ImportedFunctions() {
		m, n, _ := d.Import()
		out = append(out, Import{Module: m, Name: n, Params: d.ParamTypes(), Results: d.ResultTypes()})
	}
	return out, nil
}

// EnvoyProvides reports whether Envoy ≥ 1.33 links an import of that name
// and signature for a module of the given ABI (abi021: the module exports
// proxy_abi_version_0_2_1).
func EnvoyProvides(imp Import, abi021 bool) bool {
	for i := range hostFuncs {
		hf := &hostFuncs[i]
		if hf.module != imp.Module || hf.name != imp.Name {
			continue
		}
		if hf.abi021 && !abi021 {
			return false
		}
		return slices.Equal(hf.params, imp.Params) && slices.Equal(hf.results, imp.Results)
	}
	return false
}

// CheckImports compiles module and returns an error naming every import that
// Envoy ≥ 1.33 would not link (an unknown name or a wrong signature).
func CheckImports(ctx context.Context, module []byte) error {
	imps, err := ModuleImports(ctx, module)
	if err != nil {
		return err
	}
	abi, err := moduleABI(ctx, module)
	if err != nil {
		return err
	}
	return missingImports(imps, abi == abi021)
}

func missingImports(imps []Import, abi021 bool) error {
	var bad []string
	for _, imp := range imps {
		if !EnvoyProvides(imp, abi021) {
			bad = append(bad, imp.String()+signature(imp.Params, imp.Results))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("wasmtest: linking: Envoy ≥ 1.33 does not provide %s (shared/proxy-wasm.md 1.3 and 2.1 list what it does)", strings.Join(bad, ", "))
}

func signature(params, results []api.ValueType) string {
	s := "("
	for i, p := range params {
		if i > 0 {
			s += ","
		}
		s += api.ValueTypeName(p)
	}
	s += ")"
	for _, r := range results {
		s += api.ValueTypeName(r)
	}
	return s
}

// ABI versions the host accepts.
const (
	abi020 = "0_2_0"
	abi021 = "0_2_1"
)

func moduleABI(ctx context.Context, module []byte) (string, error) {
	rt, cm, err := compileModule(ctx, nil, module)
	if err != nil {
		return "", err
	}
	defer rt.Close(ctx)
	return abiOf(cm)
}

func abiOf(cm wazero.CompiledModule) (string, error) {
	exp := cm.ExportedFunctions()
	switch {
	case exp["proxy_abi_version_0_2_1"] != nil:
		return abi021, nil
	case exp["proxy_abi_version_0_2_0"] != nil:
		return abi020, nil
	case exp["proxy_abi_version_0_1_0"] != nil:
		return "", fmt.Errorf("wasmtest: the module exports proxy_abi_version_0_1_0: this host implements ABI 0.2.0 and 0.2.1 only; rebuild with a current SDK")
	}
	return "", fmt.Errorf("wasmtest: the module exports no proxy_abi_version_* marker: export proxy_abi_version_0_2_1 so the host knows the ABI")
}
