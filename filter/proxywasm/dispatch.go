package proxywasm

import (
	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"
)

// callback names a proxy_on_* export, for logs and panic reports.
type callback uint8

const (
	cbContextCreate callback = iota
	cbVMStart
	cbConfigure
	cbTick
	cbQueueReady
	cbRequestHeaders
	cbRequestBody
	cbRequestTrailers
	cbResponseHeaders
	cbResponseBody
	cbResponseTrailers
	cbHttpCallResponse
	cbLog
	cbDone
	cbDelete
)

var callbackNames = [...]string{
	cbContextCreate:    "proxy_on_context_create",
	cbVMStart:          "proxy_on_vm_start",
	cbConfigure:        "proxy_on_configure",
	cbTick:             "proxy_on_tick",
	cbQueueReady:       "proxy_on_queue_ready",
	cbRequestHeaders:   "proxy_on_request_headers",
	cbRequestBody:      "proxy_on_request_body",
	cbRequestTrailers:  "proxy_on_request_trailers",
	cbResponseHeaders:  "proxy_on_response_headers",
	cbResponseBody:     "proxy_on_response_body",
	cbResponseTrailers: "proxy_on_response_trailers",
	cbHttpCallResponse: "proxy_on_http_call_response",
	cbLog:              "proxy_on_log",
	cbDone:             "proxy_on_done",
	cbDelete:           "proxy_on_delete",
}

func (c callback) String() string {
	if int(c) < len(callbackNames) {
		return callbackNames[c]
	}
	return "proxy_on_unknown"
}

// The functions below are the proxy_on_* callbacks with their ABI
// signatures. The wasip1 exports and the native stand-in both call them.
// None of them panics: an unknown or deleted context id gets the safe
// default, and a panic in the filter is recovered (recover.go).

func onContextCreate(id, parent uint32) {
	s := state()
	if s == nil {
		return
	}
	if parent == 0 {
		vm := s.vmContext()
		if vm == nil {
			hLog(abi.LogError, "proxywasm: no VMContext is registered: call proxywasm.SetVMContext from the filter's init()")
			return
		}
		s.active = id
		defer s.recoverCreate(id, nil)
		if pc := vm.NewPluginContext(id); pc != nil {
			s.plugins[id] = &pluginState{ctx: pc}
		}
		return
	}
	p := s.plugins[parent]
	if p == nil {
		return
	}
	s.active = id
	st := &streamState{root: parent}
	s.streams[id] = st
	defer s.recoverCreate(id, st)
	st.ctx = p.ctx.NewHttpContext(id)
	if st.ctx == nil {
		delete(s.streams, id)
	}
}

func onVMStart(root, size uint32) (ok bool) {
	s := state()
	if s == nil {
		return false
	}
	vm := s.vmContext()
	if vm == nil {
		hLog(abi.LogError, "proxywasm: no VMContext is registered: call proxywasm.SetVMContext from the filter's init()")
		return false
	}
	s.active = root
	defer s.recoverBool(cbVMStart, root, &ok, false)
	return bool(vm.OnVMStart(int(size)))
}

func onConfigure(root, size uint32) (ok bool) {
	s, p := activePlugin(root)
	if p == nil {
		return false
	}
	defer s.recoverBool(cbConfigure, root, &ok, false)
	return bool(p.ctx.OnPluginStart(int(size)))
}

func onTick(root uint32) {
	s, p := activePlugin(root)
	if p == nil {
		return
	}
	defer s.recoverBool(cbTick, root, nil, false)
	p.ctx.OnTick()
}

func onQueueReady(root, queue uint32) {
	s, p := activePlugin(root)
	if p == nil {
		return
	}
	defer s.recoverBool(cbQueueReady, root, nil, false)
	p.ctx.OnQueueReady(queue)
}

// activePlugin finds the plugin context root names and makes it the
// active context; p is nil when the VM's state or the plugin is gone.
func activePlugin(root uint32) (s *vmState, p *pluginState) {
	s = state()
	if s == nil {
		return nil, nil
	}
	p = s.plugins[root]
	if p == nil {
		return nil, nil
	}
	s.active = root
	return s, p
}

// onStream runs one HTTP stream callback.
func onStream(id uint32, cb callback, n uint32, eos bool) (act types.Action) {
	s := state()
	if s == nil {
		return types.ActionContinue
	}
	st := s.streams[id]
	if st == nil {
		return types.ActionContinue
	}
	s.active = id
	if st.failed {
		return s.afterFailure(id, st, cb)
	}
	defer s.recoverStream(cb, id, st, &act)
	switch cb {
	case cbRequestHeaders:
		return st.ctx.OnHttpRequestHeaders(int(n), eos)
	case cbRequestBody:
		return st.ctx.OnHttpRequestBody(int(n), eos)
	case cbRequestTrailers:
		return st.ctx.OnHttpRequestTrailers(int(n))
	case cbResponseHeaders:
		return st.ctx.OnHttpResponseHeaders(int(n), eos)
	case cbResponseBody:
		return st.ctx.OnHttpResponseBody(int(n), eos)
	case cbResponseTrailers:
		return st.ctx.OnHttpResponseTrailers(int(n))
	}
	return types.ActionContinue
}

func onHttpCallResponse(root, call, numHeaders, bodySize, numTrailers uint32) {
	s := state()
	if s == nil {
		return
	}
	c, ok := s.callouts[call]
	if !ok {
		return
	}
	delete(s.callouts, call)
	if c.cb == nil {
		return
	}
	var st *streamState
	if _, isPlugin := s.plugins[c.caller]; !isPlugin {
		// The call came from an HTTP stream: run the callback as that
		// stream, if the stream is still there and still healthy.
		st = s.streams[c.caller]
		if st == nil || st.failed {
			return
		}
		if hSetEffectiveContext(c.caller) != abi.StatusOK {
			return
		}
	}
	s.active = c.caller
	defer s.recoverCallout(c.caller, st)
	c.cb(int(numHeaders), int(bodySize), int(numTrailers))
}

func onLog(id uint32) {
	s := state()
	if s == nil {
		return
	}
	if st := s.streams[id]; st != nil {
		s.streamDone(id, st)
	}
}

// streamDone calls OnHttpStreamDone once per stream: from proxy_on_log, or
// from proxy_on_delete for a host that never sent proxy_on_log (RATIONALE.md,
// "Why does proxy_on_delete call OnHttpStreamDone?").
func (s *vmState) streamDone(id uint32, st *streamState) {
	if st.ctx == nil || st.doneCalled {
		return
	}
	st.doneCalled = true
	s.active = id
	defer s.recoverBool(cbLog, id, nil, false)
	st.ctx.OnHttpStreamDone()
}

func onDone(id uint32) (ok bool) {
	s, p := activePlugin(id)
	if p == nil {
		return true
	}
	defer s.recoverBool(cbDone, id, &ok, true)
	return p.ctx.OnPluginDone()
}

func onDelete(id uint32) {
	s := state()
	if s == nil {
		return
	}
	if st := s.streams[id]; st != nil {
		s.streamDone(id, st)
		delete(s.streams, id)
		return
	}
	if _, ok := s.plugins[id]; ok {
		delete(s.plugins, id)
		for call, c := range s.callouts {
			if c.root == id {
				delete(s.callouts, call)
			}
		}
	}
}
