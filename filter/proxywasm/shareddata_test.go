package proxywasm_test

import (
	"encoding/binary"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokentriage/tokentriage/filter/proxywasm"
	"github.com/tokentriage/tokentriage/filter/proxywasm/proxytest"
)

// Envoy's CAS rules (fact sheet 3.4), step by step.
func TestSharedDataCASRules(t *testing.T) {
	type step struct {
		op    string // "get" or "set"
		key   string
		value string
		cas   uint32
		want  error
		cas2  uint32 // for get: the cas it must return
	}
	steps := []step{
		{op: "get", key: "a", want: types.ErrorStatusNotFound},
		{op: "set", key: "a", value: "1", cas: 77}, // missing key: any cas succeeds
		{op: "get", key: "a", value: "1", cas2: 1}, // the global counter starts at 1
		{op: "set", key: "b", value: "x", cas: 0},
		{op: "get", key: "b", value: "x", cas2: 2}, // one counter for every key
		{op: "set", key: "a", value: "2", cas: 2, want: types.ErrorStatusCasMismatch},
		{op: "set", key: "a", value: "2", cas: 1},
		{op: "get", key: "a", value: "2", cas2: 3},
		{op: "set", key: "a", value: "3", cas: 1, want: types.ErrorStatusCasMismatch}, // stale
		{op: "set", key: "a", value: "", cas: 0},                                      // 0 overwrites
		{op: "get", key: "a", value: "", cas2: 4},
	}
	var errs []string
	h := &hooks{reqHeaders: func(uint32, int, bool) types.Action {
		for i, s := range steps {
			switch s.op {
			case "get":
				v, cas, err := proxywasm.GetSharedData(s.key)
				if !errors.Is(err, s.want) || string(v) != s.value || cas != s.cas2 {
					errs = append(errs, "step "+strconv.Itoa(i)+": get "+s.key+" = "+string(v)+", cas "+strconv.Itoa(int(cas))+", err "+errString(err))
				}
			case "set":
				if err := proxywasm.SetSharedData(s.key, []byte(s.value), s.cas); !errors.Is(err, s.want) {
					errs = append(errs, "step "+strconv.Itoa(i)+": set "+s.key+": "+errString(err))
				}
			}
		}
		return types.ActionContinue
	}}
	e := start(t, h, proxytest.Options{})
	e.CallOnRequestHeaders(e.InitializeHttpContext(), requestHeaders, true)
	for _, m := range errs {
		t.Error(m)
	}
}

func TestGetSharedDataIntoReusesTheBuffer(t *testing.T) {
	var small, large []byte
	buf := make([]byte, 0, 8)
	h := &hooks{reqHeaders: func(uint32, int, bool) types.Action {
		proxywasm.SetSharedData("small", []byte("1234"), 0)
		proxywasm.SetSharedData("large", []byte("0123456789"), 0)
		small, _, _ = proxywasm.GetSharedDataInto("small", buf)
		large, _, _ = proxywasm.GetSharedDataInto("large", buf)
		return types.ActionContinue
	}}
	e := start(t, h, proxytest.Options{})
	e.CallOnRequestHeaders(e.InitializeHttpContext(), requestHeaders, true)
	if string(small) != "1234" || &small[0] != &buf[:1][0] {
		t.Errorf("a value that fits must land in dst: %q", small)
	}
	if string(large) != "0123456789" {
		t.Errorf("a value larger than dst: %q", large)
	}
}

// Several VMs on several goroutines increment one shared counter with a
// CAS loop; the emulator lets them interleave between get and set, so
// only a correct loop ends at the exact total.
func TestSharedDataCASRaceAcrossVMs(t *testing.T) {
	const vms, perVM = 6, 200
	var mismatches atomic.Int64
	h := &hooks{reqHeaders: func(uint32, int, bool) types.Action {
		var buf [8]byte
		for {
			v, cas, err := proxywasm.GetSharedDataInto("tt/counter", buf[:])
			n := uint64(0)
			if err == nil {
				n = binary.LittleEndian.Uint64(v)
			}
			err = proxywasm.SetSharedData("tt/counter", binary.LittleEndian.AppendUint64(nil, n+1), cas)
			if err == nil {
				return types.ActionContinue
			}
			if !errors.Is(err, types.ErrorStatusCasMismatch) {
				t.Errorf("SetSharedData: %v", err)
				return types.ActionContinue
			}
			mismatches.Add(1)
		}
	}}
	first := start(t, h, proxytest.Options{})
	all := []*proxytest.Emulator{first}
	for len(all) < vms {
		e := first.NewVM()
		if e.StartPlugin() != types.OnPluginStartStatusOK {
			t.Fatal("StartPlugin failed")
		}
		all = append(all, e)
	}
	var wg sync.WaitGroup
	for _, e := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perVM {
				id := e.InitializeHttpContext()
				e.CallOnRequestHeaders(id, requestHeaders, true)
				e.CompleteHttpContext(id)
			}
		}()
	}
	wg.Wait()
	v, _, err := first.GetSharedData("tt/counter")
	if err != nil || binary.LittleEndian.Uint64(v) != vms*perVM {
		t.Fatalf("counter = %v, %v; want %d", v, err, vms*perVM)
	}
	t.Logf("%d CAS mismatches retried", mismatches.Load())
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
