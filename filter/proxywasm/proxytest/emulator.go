// Package proxytest runs filters written against package proxywasm natively,
// on an in-memory host that behaves like Envoy's (shared/proxy-wasm.md):
// header maps per map type with Envoy's lifetimes, body buffers with
// proxy_set_buffer_bytes' start/size rules, deferred local replies that run
// the filter's response callbacks, shared data with Envoy's CAS rules,
// callouts the test answers, ticks, metrics, properties and captured logs.
// Its method names follow the proxy-wasm-go-sdk's proxytest package.
//
// An Emulator is one VM. NewVM adds another VM to the same host process:
// its own contexts, the same shared data and metrics. Each VM is
// single-threaded like an Envoy worker, but VMs driven from different
// goroutines interleave at every shared-data call, so tests can race them.
//
// Package-level variables of the filter are shared by every emulated VM of
// a test binary, where each wasm VM has its own; keep per-VM state in the
// VM or plugin context. The filter must call the proxywasm API on the
// callback's own goroutine, and must not call Emulator methods from inside
// a callback (the VM is busy: the call would wait for itself).
package proxytest

import (
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokentriage/tokentriage/filter/proxywasm"
	"github.com/tokentriage/tokentriage/filter/proxywasm/internal/nativehost"
)

// Options configure an emulated host process.
type Options struct {
	// VMContext is the filter's VM context, shared by every VM of the
	// process; nil uses the one registered with proxywasm.SetVMContext.
	VMContext types.VMContext
	// NewVMContext, when set, gives each VM its own VM context instead.
	NewVMContext func() types.VMContext
	// PluginConfiguration is readable during OnPluginStart.
	PluginConfiguration []byte
	// VMConfiguration is readable at any time.
	VMConfiguration []byte
	// Properties answer proxy_get_property, keyed by their path written as
	// wasmtest.Config.Properties takes it: segments joined by dots, a
	// segment holding a dot as a quoted key in brackets
	// ("xds.route_metadata.filter_metadata['envoy.filters.http.wasm'].k"),
	// or the wire form. xds.* entries also answer at their older
	// top-level spelling (node.id, route_name, …).
	Properties map[string][]byte
	// PluginName, RootID and VMID answer the plugin_name, plugin_root_id
	// and plugin_vm_id properties.
	PluginName, RootID, VMID string
	// LogLevel is what proxy_get_log_level answers; lower levels are
	// dropped, as Envoy does. The zero value keeps every log.
	LogLevel proxywasm.LogLevel
	// SequentialMetricIDs numbers metrics 0, 1, 2, … in the order they are
	// defined, whatever their type, as the upstream SDK's test host does,
	// instead of Envoy's 4, 8, … (counters), 5, 9, … (gauges), 6, 10, …
	// (histograms). A filter must work under both: 0 is a valid id.
	SequentialMetricIDs bool
	// Clusters, when not nil, are the only cluster names DispatchHttpCall
	// accepts (others get types.ErrorStatusBadArgument, as in Envoy).
	Clusters []string
}

// Emulator is one emulated VM of a host process.
type Emulator struct {
	proc *process
	nv   *nativehost.VM
	h    *vmHost
}

// NewEmulator starts a host process with one VM. Call StartPlugin next.
func NewEmulator(opts Options) *Emulator {
	return newProcess(opts).newVM()
}

// NewVM adds a VM to e's host process: its own contexts, tick and
// callouts; the same shared data and metrics. Call StartPlugin on it.
func (e *Emulator) NewVM() *Emulator { return e.proc.newVM() }

func (p *process) newVM() *Emulator {
	vm := p.opts.VMContext
	if p.opts.NewVMContext != nil {
		vm = p.opts.NewVMContext()
	}
	h := newVMHost(p)
	nv := &nativehost.VM{Host: h, State: nativehost.Callbacks().NewState(vm)}
	return &Emulator{proc: p, nv: nv, h: h}
}

func (e *Emulator) guest() nativehost.Guest { return nativehost.Callbacks() }

// StartVM creates the root context and calls proxy_on_vm_start.
func (e *Emulator) StartVM() types.OnVMStartStatus {
	e.nv.Enter()
	defer e.nv.Exit()
	return types.OnVMStartStatus(e.startVM())
}

func (e *Emulator) startVM() bool {
	h := e.h
	if h.vmStarted {
		return h.vmOK
	}
	h.vmStarted = true
	h.rootID = h.allocID()
	h.rootAlive = true
	h.effective = h.rootID
	e.guest().OnContextCreate(h.rootID, 0)
	h.vmOK = e.guest().OnVMStart(h.rootID, uint32(len(e.proc.opts.VMConfiguration)))
	h.effective = 0
	e.afterCall()
	return h.vmOK
}

// StartPlugin calls proxy_on_configure (after StartVM, which it runs if
// needed). The plugin configuration is readable only during this call.
func (e *Emulator) StartPlugin() types.OnPluginStartStatus {
	e.nv.Enter()
	defer e.nv.Exit()
	if !e.startVM() {
		return types.OnPluginStartStatusFailed
	}
	h := e.h
	h.configuring = true
	h.effective = h.rootID
	ok := e.guest().OnConfigure(h.rootID, uint32(len(e.proc.opts.PluginConfiguration)))
	h.configuring = false
	h.effective = 0
	e.afterCall()
	return types.OnPluginStartStatus(ok)
}

// FinishVM calls proxy_on_done on the root context and, if it returns
// true, proxy_on_delete. On false the root waits for proxywasm.PluginDone.
func (e *Emulator) FinishVM() bool {
	e.nv.Enter()
	defer e.nv.Exit()
	h := e.h
	if !h.rootAlive {
		return true
	}
	h.effective = h.rootID
	ok := e.guest().OnDone(h.rootID)
	h.effective = 0
	if ok {
		e.deleteRoot()
	} else {
		h.donePending = true
	}
	e.afterCall()
	return ok
}

func (e *Emulator) deleteRoot() {
	h := e.h
	h.effective = h.rootID
	e.guest().OnDelete(h.rootID)
	h.effective = 0
	h.rootAlive = false
	h.donePending = false
	h.callouts = map[uint32]*HttpCalloutAttribute{}
	h.tickPeriod = 0
}

// RootContextID returns the plugin context's id (0 before StartVM).
func (e *Emulator) RootContextID() uint32 {
	return locked(e, func(h *vmHost) uint32 { return h.rootID })
}

// GetTickPeriod returns the tick period the plugin set, in milliseconds.
func (e *Emulator) GetTickPeriod() uint32 {
	return locked(e, func(h *vmHost) uint32 { return h.tickPeriod })
}

// Tick calls proxy_on_tick, as the host's timer would, if the plugin has
// set a tick period; it reports whether it did.
func (e *Emulator) Tick() bool {
	e.nv.Enter()
	defer e.nv.Exit()
	h := e.h
	if !h.rootAlive || h.tickPeriod == 0 {
		return false
	}
	h.effective = h.rootID
	e.guest().OnTick(h.rootID)
	h.effective = 0
	e.afterCall()
	return true
}

// HostCalls returns how many host calls this VM's filter has made.
func (e *Emulator) HostCalls() uint64 {
	return locked(e, func(h *vmHost) uint64 { return h.hostCalls })
}

// SharedDataOps returns how many of them were shared-data gets and sets.
func (e *Emulator) SharedDataOps() uint64 {
	return locked(e, func(h *vmHost) uint64 { return h.sharedOps })
}

// locked reads the host's state under the emulator's lock.
func locked[T any](e *Emulator, read func(*vmHost) T) T {
	e.nv.Lock()
	defer e.nv.Unlock()
	return read(e.h)
}

// afterCall runs what the host defers until the VM call returns: stream
// resumes, local replies (which run the response callbacks), resets, and
// a root's proxy_done.
func (e *Emulator) afterCall() {
	h := e.h
	for len(h.touched) > 0 {
		s := h.touched[0]
		h.touched = h.touched[1:]
		s.touched = false
		if s.finished {
			continue
		}
		if s.pendingReset {
			s.pendingReset = false
			s.reset = true
			e.complete(s)
			continue
		}
		if lr := s.pendingLocal; lr != nil {
			s.pendingLocal = nil
			s.req.resume, s.resp.resume = false, false
			if s.local == nil {
				e.sendLocal(s, lr)
			}
			continue
		}
		if s.req.resume {
			s.req.resume = false
			e.resume(s, &s.req)
		}
		if s.resp.resume {
			s.resp.resume = false
			e.resume(s, &s.resp)
		}
	}
	if h.doneCalled {
		h.doneCalled = false
		if h.donePending {
			e.deleteRoot()
		}
	}
}
