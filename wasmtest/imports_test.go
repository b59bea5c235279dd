package wasmtest

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero/api"
)

// Every function the guest imports must be one Envoy ≥ 1.33 links.
func TestGuestImportsAreEnvoys(t *testing.T) {
	ctx := context.Background()
	imps, err := ModuleImports(ctx, conformance(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(imps) == 0 {
		t.Fatal("no imports listed")
	}
	for _, imp := range imps {
		if !EnvoyProvides(imp, true) {
			t.Errorf("%s%s is not in Envoy's import lists", imp, signature(imp.Params, imp.Results))
		}
	}
	if err := CheckImports(ctx, conformance(t)); err != nil {
		t.Error(err)
	}
}

func TestEnvoyProvides(t *testing.T) {
	for _, c := range []struct {
		imp    Import
		abi021 bool
		want   bool
	}{
		{Import{"env", "proxy_log", []api.ValueType{i32, i32, i32}, []api.ValueType{i32}}, false, true},
		{Import{"env", "proxy_get_log_level", []api.ValueType{i32}, []api.ValueType{i32}}, true, true},
		{Import{"env", "proxy_get_log_level", []api.ValueType{i32}, []api.ValueType{i32}}, false, false},
		{Import{"env", "proxy_log", []api.ValueType{i32, i32}, []api.ValueType{i32}}, false, false},
		{Import{"env", "proxy_no_such_call", nil, []api.ValueType{i32}}, false, false},
		{Import{"env", "proxy_increment_metric", []api.ValueType{i32, i64}, []api.ValueType{i32}}, false, true},
		{Import{"wasi_snapshot_preview1", "poll_oneoff", []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}}, false, true},
		{Import{"wasi_snapshot_preview1", "proc_exit", []api.ValueType{i32}, nil}, false, true},
		{Import{"wasi_snapshot_preview1", "sock_accept", []api.ValueType{i32, i32, i32}, []api.ValueType{i32}}, false, false},
	} {
		if got := EnvoyProvides(c.imp, c.abi021); got != c.want {
			t.Errorf("EnvoyProvides(%s, abi021=%v) = %v, want %v", c.imp, c.abi021, got, c.want)
		}
	}
}

// A module importing what Envoy lacks fails to link, naming the import.
func TestMissingImportFailsNew(t *testing.T) {
	mod := wasmModule("proxy_abi_version_0_2_1", "env", "proxy_not_in_envoy")
	_, err := New(context.Background(), Config{Module: mod, Clock: NewManualClock(t0)})
	want := "wasmtest: linking: Envoy ≥ 1.33 does not provide env.proxy_not_in_envoy()i32"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("New error = %v\nwant prefix %s", err, want)
	}
	if err := CheckImports(context.Background(), mod); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("CheckImports = %v", err)
	}
}

// proxy_get_log_level exists only for ABI 0.2.1 modules.
func TestLogLevelOnlyFor021(t *testing.T) {
	mod := wasmModule("proxy_abi_version_0_2_0", "env", "proxy_get_log_level")
	if err := CheckImports(context.Background(), mod); err == nil {
		t.Error("CheckImports accepted proxy_get_log_level in an ABI 0.2.0 module")
	}
	mod = wasmModule("proxy_abi_version_0_2_1", "env", "proxy_get_log_level")
	if err := CheckImports(context.Background(), mod); err != nil && strings.Contains(err.Error(), "proxy_get_log_level") {
		t.Errorf("CheckImports rejected proxy_get_log_level in an ABI 0.2.1 module: %v", err)
	}
}

func TestModuleWithoutABIMarker(t *testing.T) {
	mod := wasmModule("something_else", "env", "proxy_log")
	_, err := New(context.Background(), Config{Module: mod, Clock: NewManualClock(t0)})
	if err == nil || !strings.Contains(err.Error(), "exports no proxy_abi_version_* marker") {
		t.Errorf("New error = %v", err)
	}
}

// wasmModule hand-assembles a module that imports module.name as ()->i32
// (proxy_get_log_level and proxy_log get their real types) and exports a
// marker function and a memory.
func wasmModule(marker, module, name string) []byte {
	params := []byte{}
	switch name {
	case "proxy_get_log_level":
		params = []byte{0x7f}
	case "proxy_log":
		params = []byte{0x7f, 0x7f, 0x7f}
	}
	vec := func(b ...[]byte) []byte {
		out := []byte{byte(len(b))}
		for _, x := range b {
			out = append(out, x...)
		}
		return out
	}
	str := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	section := func(id byte, body []byte) []byte { return append([]byte{id, byte(len(body))}, body...) }
	typ0 := append(append([]byte{0x60, byte(len(params))}, params...), 1, 0x7f) // (params) -> i32
	typ1 := []byte{0x60, 0, 0}                                                  // () -> ()
	m := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	m = append(m, section(1, vec(typ0, typ1))...)
	m = append(m, section(2, vec(append(append(str(module), str(name)...), 0x00, 0x00)))...)
	m = append(m, section(3, vec([]byte{1}))...)
	m = append(m, section(5, vec([]byte{0x00, 0x01}))...)
	m = append(m, section(7, vec(append(str(marker), 0x00, 0x01), append(str("memory"), 0x02, 0x00)))...)
	m = append(m, section(10, vec([]byte{2, 0, 0x0b}))...)
	return m
}

// wasmtest must never import the filter: it is a host, and the filter is
// only ever loaded as a .wasm.
func TestDoesNotImportFilter(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goBin, "list", "-deps", "-test", "github.com/tokentriage/tokentriage/wasmtest").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "github.com/tokentriage/tokentriage/filter" || strings.HasPrefix(p, "github.com/tokentriage/tokentriage/filter/") {
			t.Errorf("wasmtest depends on %s", p)
		}
	}
}
