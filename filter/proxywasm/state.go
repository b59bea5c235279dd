package proxywasm

import "github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

// registered is the VMContext SetVMContext installed.
var registered types.VMContext

// SetVMContext registers the filter's VM context. Call it from init(); it
// makes no host call. The binding asks it for a plugin context on every
// proxy_on_context_create with parent 0.
func SetVMContext(vm types.VMContext) { registered = vm }

// vmState is everything the binding keeps for one VM: in a wasm instance
// there is exactly one; the native stand-in keeps one per emulated VM.
type vmState struct {
	vm       types.VMContext // nil: use registered
	plugins  map[uint32]*pluginState
	streams  map[uint32]*streamState
	callouts map[uint32]callout
	// active is the context the host treats as current: the callback's
	// context, or the one proxy_set_effective_context switched to.
	active uint32
	// scratch holds encodings the host copies during a call (header maps,
	// property paths), reused from call to call.
	scratch []byte
}

type pluginState struct {
	ctx types.PluginContext
}

type streamState struct {
	ctx  types.HttpContext
	root uint32
	// failed: a callback of this stream panicked. Later callbacks pass
	// through without reaching the filter, except OnHttpStreamDone.
	failed bool
	// replyOwed: the stream failed before it could answer (its context
	// panicked on creation); the next request callback sends the reply.
	replyOwed bool
	owed      Panic
	// doneCalled: OnHttpStreamDone has run.
	doneCalled bool
}

type callout struct {
	cb     func(numHeaders, bodySize, numTrailers int)
	caller uint32
	root   uint32
}

func newVMState(vm types.VMContext) *vmState {
	return &vmState{
		vm:       vm,
		plugins:  map[uint32]*pluginState{},
		streams:  map[uint32]*streamState{},
		callouts: map[uint32]callout{},
	}
}

func (s *vmState) vmContext() types.VMContext {
	if s.vm != nil {
		return s.vm
	}
	return registered
}

// maxScratch bounds the scratch buffer a VM keeps between calls.
const maxScratch = 64 << 10

// takeScratch returns an empty buffer to encode into; give it back with
// keepScratch once the host call has returned.
func takeScratch() []byte {
	if s := state(); s != nil {
		b := s.scratch[:0]
		s.scratch = nil
		return b
	}
	return nil
}

func keepScratch(b []byte) {
	if s := state(); s != nil && cap(b) <= maxScratch {
		s.scratch = b[:0]
	}
}

// rootOf returns the plugin context id that owns context id.
func (s *vmState) rootOf(id uint32) uint32 {
	if st := s.streams[id]; st != nil {
		return st.root
	}
	return id
}

// alive reports whether id names a live plugin or HTTP context.
func (s *vmState) alive(id uint32) bool {
	if _, ok := s.plugins[id]; ok {
		return true
	}
	_, ok := s.streams[id]
	return ok
}
