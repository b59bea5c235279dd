package wasmtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Restriction modes (shared/proxy-wasm.md 3.1): while _initialize runs, and
// while the guest allocator runs, only a few host calls are allowed; any
// other traps with "restricted_callback", as cpp-host does.
const (
	restrictInit  uint8 = 1 << 0
	restrictAlloc uint8 = 1 << 1
)

// vm is one instance of the module: Envoy's per-worker clone. It is single
// threaded: every call into it, and every look at the state the guest can
// reach, happens under mu.
type vm struct {
	h     *Host
	index int    // 0 is the canary, 1… the workers
	name  string // "canary", "worker 1", "worker 1 (reload 1)"
	mod   api.Module
	mem   api.Memory
	ctx   *vmContext

	mu      sync.Mutex
	failed  atomic.Bool
	failure string // why it failed, for errors and logs
	closed  bool

	restrict uint8

	fn exportsOf

	stack      [8]uint64
	allocStack [1]uint64

	rootID    uint32
	nextID    uint32
	rootAlive bool
	rootHold  bool          // root context answered on_done with false; waits for proxy_done
	rootDone  chan struct{} // closed by proxy_done while Close waits for it
	streams   map[uint32]*stream
	curID     uint32  // context of the running top-level call
	cur       *stream // its stream, nil for the root context
	effID     uint32  // proxy_set_effective_context, 0 = none
	eff       *stream
	pluginCfg bool // PLUGIN_CONFIGURATION readable (root create, vm_start, configure)
	rootLocal bool // the root context called send_local_response (held, as Envoy)
	touched   []*stream

	calls     map[uint32]*callout
	nextCall  uint32
	callResp  *calloutResponse // during proxy_on_http_call_response
	statusMsg string
	statusCod uint32

	tickPeriod time.Duration
	tickTimer  Timer
	tickGen    uint64

	metrics    map[uint32]*metric
	nextMetric [3]uint32

	counts    *Counts // where host calls of the running call are counted
	rootCount Counts
	total     Counts
	prof      map[string]*exportStat // each export's calls (profile.go)

	scratch []byte
}

// exportsOf holds the guest callbacks; a nil one is absent (all are optional).
type exportsOf struct {
	alloc, create, vmStart, configure, tick                     api.Function
	reqHeaders, reqBody, reqTrailers                            api.Function
	respHeaders, respBody, respTrailers                         api.Function
	callResponse, queueReady, done, log, delete, validateConfig api.Function
}

// vmContext is the context every call into a VM carries, so host functions
// find their VM without a lookup.
type vmContext struct {
	context.Context
	v *vm
}

type vmKey struct{}

func (c *vmContext) Value(k any) any {
	if k == (vmKey{}) {
		return c.v
	}
	return c.Context.Value(k)
}

func vmOf(ctx context.Context) *vm {
	if c, ok := ctx.(*vmContext); ok {
		return c.v
	}
	return ctx.Value(vmKey{}).(*vm)
}

// trapError unwinds the guest after a failure that has already been recorded.
type trapError struct{ msg string }

func (e *trapError) Error() string { return e.msg }

// restrictedError is what a restricted host call traps with.
type restrictedError struct{ call string }

func (e *restrictedError) Error() string {
	return "restricted_callback: " + e.call + " is not allowed while _initialize or the guest allocator runs (only proxy_log and some WASI calls are)"
}

// newVM instantiates the module and runs _initialize in restricted mode. It
// does not create the root context; start does.
func (h *Host) newVM(index int, name string) (*vm, error) {
	v := &vm{
		h:       h,
		index:   index,
		name:    name,
		rootID:  1,
		nextID:  2,
		streams: make(map[uint32]*stream),
		calls:   make(map[uint32]*callout),
		metrics: make(map[uint32]*metric),
	}
	v.ctx = &vmContext{Context: context.Background(), v: v}
	v.counts = &v.rootCount
	v.nextMetric = [3]uint32{metricCounter, metricGauge, metricHistogram}
	mod, err := h.rt.InstantiateModule(v.ctx, h.compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return nil, fmt.Errorf("wasmtest: %s: instantiating the module: %w", name, err)
	}
	v.mod = mod
	v.mem = mod.Memory()
	if v.mem == nil {
		mod.Close(context.Background())
		return nil, fmt.Errorf("wasmtest: %s: the module exports no memory: build it for wasip1 with -buildmode=c-shared", name)
	}
	f := mod.ExportedFunction
	v.fn = exportsOf{
		create: f("proxy_on_context_create"), vmStart: f("proxy_on_vm_start"), configure: f("proxy_on_configure"),
		tick: f("proxy_on_tick"), reqHeaders: f("proxy_on_request_headers"), reqBody: f("proxy_on_request_body"),
		reqTrailers: f("proxy_on_request_trailers"), respHeaders: f("proxy_on_response_headers"),
		respBody: f("proxy_on_response_body"), respTrailers: f("proxy_on_response_trailers"),
		callResponse: f("proxy_on_http_call_response"), queueReady: f("proxy_on_queue_ready"),
		done: f("proxy_on_done"), log: f("proxy_on_log"), delete: f("proxy_on_delete"),
		validateConfig: f("proxy_validate_configuration"),
	}
	// cpp-host looks for malloc first, then proxy_on_memory_allocate.
	if v.fn.alloc = f("malloc"); v.fn.alloc == nil {
		v.fn.alloc = f("proxy_on_memory_allocate")
	}
	if v.fn.alloc == nil {
		mod.Close(context.Background())
		return nil, fmt.Errorf("wasmtest: %s: the module exports neither malloc nor proxy_on_memory_allocate, so the host cannot hand it data", name)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.restrict = restrictInit
	if init := f("_initialize"); init != nil {
		v.enterRoot()
		if _, ok := v.call(init, "_initialize"); ok {
			if m := f("main"); m != nil {
				v.call(m, "main", 0, 0)
			}
		}
	} else if start := f("_start"); start != nil {
		v.enterRoot()
		v.call(start, "_start")
	}
	v.restrict = 0
	if v.failed.Load() {
		mod.Close(context.Background())
		return nil, fmt.Errorf("wasmtest: %s: initializing the module: %s", name, v.failure)
	}
	return v, nil
}

// start creates the root context and runs vm_start and configure, in
// Envoy's order (shared/proxy-wasm.md 3.1).
func (v *vm) start() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	h := v.h
	v.pluginCfg = true
	defer func() { v.pluginCfg = false }()
	v.enterRoot()
	if _, ok := v.call(v.fn.create, "proxy_on_context_create", uint64(v.rootID), 0); !ok {
		return v.startError("proxy_on_context_create")
	}
	v.rootAlive = true
	v.enterRoot()
	r, ok := v.callDefault(v.fn.vmStart, 1, "proxy_on_vm_start", uint64(v.rootID), uint64(len(h.cfg.VMConfig)))
	if !ok {
		return v.startError("proxy_on_vm_start")
	}
	if r == 0 {
		return fmt.Errorf("wasmtest: %s: proxy_on_vm_start returned false: the plugin refused to start%s", v.name, v.recentErrors())
	}
	v.enterRoot()
	r, ok = v.callDefault(v.fn.configure, 1, "proxy_on_configure", uint64(v.rootID), uint64(len(h.cfg.PluginConfig)))
	if !ok {
		return v.startError("proxy_on_configure")
	}
	if r == 0 {
		return fmt.Errorf("wasmtest: %s: proxy_on_configure returned false: the plugin rejected its configuration%s", v.name, v.recentErrors())
	}
	v.afterCall(nil)
	return nil
}

func (v *vm) startError(what string) error {
	return fmt.Errorf("wasmtest: %s: %s: %s", v.name, what, v.failure)
}

// recentErrors quotes the VM's last warn-or-worse log lines, to say why a
// plugin refused.
func (v *vm) recentErrors() string {
	lines := v.h.logs.recent(v.index, LogWarn, 3)
	if len(lines) == 0 {
		return ""
	}
	return " (its log: " + strings.Join(lines, "; ") + ")"
}

// enterRoot makes the root context the current context of the next call.
func (v *vm) enterRoot() {
	v.curID, v.cur = v.rootID, nil
	v.effID, v.eff = 0, nil
	v.counts = &v.rootCount
}

// enterStream makes s the current context of the next call.
func (v *vm) enterStream(s *stream) {
	v.curID, v.cur = s.id, s
	v.effID, v.eff = 0, nil
	v.counts = &s.counts
}

// context is the context host calls act on: the effective one if set.
func (v *vm) context() (uint32, *stream) {
	if v.effID != 0 {
		return v.effID, v.eff
	}
	return v.curID, v.cur
}

// call runs a guest export with the VM locked; ok is false if it trapped (the
// VM is then failed). A nil fn is an absent callback: (0, true).
func (v *vm) call(fn api.Function, what string, args ...uint64) (uint64, bool) {
	return v.callDefault(fn, 0, what, args...)
}

// callDefault is call with the result an absent callback stands for.
func (v *vm) callDefault(fn api.Function, def uint64, what string, args ...uint64) (uint64, bool) {
	if v.failed.Load() {
		return def, false
	}
	if fn == nil {
		return def, true
	}
	copy(v.stack[:], args)
	v.total.GuestCalls++
	v.counts.GuestCalls++
	start := time.Now()
	err := fn.CallWithStack(v.ctx, v.stack[:])
	v.timed(what, start)
	v.effID, v.eff = 0, nil
	if err != nil {
		v.fail(what, err)
		return def, false
	}
	return v.stack[0], true
}

// fail marks the VM failed (shared/proxy-wasm.md 3.10): nothing is called
// on it again, its live streams are woken so that they fail or pass
// through, its callouts are cancelled and its timer stopped.
func (v *vm) fail(what string, err error) {
	if v.failed.Load() {
		return
	}
	var te *trapError
	msg := err.Error()
	if errors.As(err, &te) {
		msg = te.msg
	}
	if i := strings.Index(msg, "\nwasm stack trace"); i >= 0 {
		msg = msg[:i]
	}
	v.failure = "Function: " + what + " failed: " + msg
	v.failed.Store(true)
	v.h.logs.add(v.index, v.name, LogCritical, "wasm vm failed: "+v.failure)
	for _, s := range v.streams {
		v.touched = append(v.touched, s)
	}
	v.cancelCallouts()
	v.stopTick()
}

// afterCall runs what a call into the VM deferred for streams other than
// self: it wakes their drivers, which act under their own turn of the lock.
func (v *vm) afterCall(self *stream) {
	if len(v.touched) == 0 {
		return
	}
	for i, s := range v.touched {
		v.touched[i] = nil
		if s != self {
			s.notify()
		}
	}
	v.touched = v.touched[:0]
}

// touch records that s has deferred work.
func (v *vm) touch(s *stream) {
	for _, t := range v.touched {
		if t == s {
			return
		}
	}
	v.touched = append(v.touched, s)
}

// shutdown ends the VM like Envoy's WasmBase::startShutdown: the root
// context gets on_done; if it agrees, on_delete follows at once. If it
// answers false (it has work to finish, like rows still to send), the VM
// stays alive, its callouts still delivered, until it calls proxy_done or
// grace runs out; then on_delete. The timer stops first: no tick after
// on_done.
func (v *vm) shutdown(grace time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return
	}
	v.stopTick()
	if v.rootAlive && !v.failed.Load() {
		v.enterRoot()
		r, ok := v.callDefault(v.fn.done, 1, "proxy_on_done", uint64(v.rootID))
		v.afterCall(nil)
		if ok && r == 0 {
			v.rootHold = true
			v.rootDone = make(chan struct{})
			done := v.rootDone
			v.mu.Unlock()
			t := time.NewTimer(grace)
			select {
			case <-done:
			case <-t.C:
			}
			t.Stop()
			v.mu.Lock()
			if v.rootHold {
				v.rootHold = false
				v.h.logs.add(v.index, v.name, LogWarn, fmt.Sprintf("the root context answered proxy_on_done with false and did not call proxy_done within %v; deleting it", grace))
			}
			v.rootDone = nil
		}
		if ok && v.rootAlive && !v.failed.Load() {
			v.enterRoot()
			v.call(v.fn.delete, "proxy_on_delete", uint64(v.rootID))
		}
		v.rootAlive = false
	}
	v.closed = true
	v.cancelCallouts()
	v.afterCall(nil)
	v.mod.Close(context.Background())
}

// discard drops a VM without calling it again (the canary, a failed VM).
func (v *vm) discard() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return
	}
	v.closed = true
	v.cancelCallouts()
	v.stopTick()
	v.mod.Close(context.Background())
}
