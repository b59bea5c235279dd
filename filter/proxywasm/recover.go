package proxywasm

import (
	"bytes"
	"runtime"
	"strconv"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"
)

// A panic that escapes a wasm export is an `unreachable` trap: the host
// marks the whole VM failed, and every later stream of that worker gets a
// 503 until the VM is rebuilt. So every export recovers. The cost on the
// normal path is one open-coded defer (a few instructions, no allocation);
// a recovered panic costs a stack capture, one proxy_log and, for an HTTP
// stream, one proxy_send_local_response (RATIONALE.md, "Why does every
// export recover?").

// Panic describes a panic the binding recovered in a callback.
type Panic struct {
	Callback  string // the export, like "proxy_on_request_headers"
	ContextID uint32
	Value     any    // what was passed to panic
	Stack     string // up to 2 KiB of the stack, from the panicking frame
}

// PanicHandler chooses the local reply sent to the client of an HTTP stream
// whose callback panicked.
type PanicHandler func(p Panic) (status uint32, headers [][2]string, body []byte)

var panicHandler PanicHandler

// SetPanicHandler replaces the reply sent when an HTTP callback panics;
// nil restores DefaultPanicReply. A handler that panics itself is replaced
// by DefaultPanicReply for that reply. Call it from init().
func SetPanicHandler(h PanicHandler) { panicHandler = h }

// DefaultPanicReply is a 500 with a JSON body:
//
//	{"error":{"type":"filter_error","message":"…"}}
//
// The message names the callback, not the panic value: the value and the
// stack go to the proxy's log (proxy_log at error level), not to clients.
func DefaultPanicReply(p Panic) (status uint32, headers [][2]string, body []byte) {
	body = []byte(`{"error":{"type":"filter_error","message":"the gateway filter failed in ` + p.Callback +
		` while handling this request; the proxy log has the details"}}`)
	return 500, [][2]string{{"content-type", "application/json"}}, body
}

func (s *vmState) reportPanic(cb callback, id uint32, r any) Panic {
	panics.Add(1)
	var buf [4096]byte
	n := runtime.Stack(buf[:], false)
	p := Panic{Callback: cb.String(), ContextID: id, Value: r, Stack: shortStack(buf[:n])}
	hLog(abi.LogError, "proxywasm: recovered panic in "+p.Callback+" (context "+
		strconv.FormatUint(uint64(id), 10)+"): "+describe(r)+"\n"+p.Stack)
	return p
}

// recoverStream is deferred by every HTTP stream callback.
func (s *vmState) recoverStream(cb callback, id uint32, st *streamState, act *types.Action) {
	r := recover()
	if r == nil {
		return
	}
	p := s.reportPanic(cb, id, r)
	st.failed = true
	s.replyPanic(p, streamOf(cb))
	*act = types.ActionPause
}

// recoverBool is deferred by the plugin callbacks; ok, when not nil, gets
// the callback's safe default.
func (s *vmState) recoverBool(cb callback, id uint32, ok *bool, safe bool) {
	r := recover()
	if r == nil {
		return
	}
	s.reportPanic(cb, id, r)
	if ok != nil {
		*ok = safe
	}
}

// recoverCreate is deferred by proxy_on_context_create. A stream whose
// context panicked on creation is answered at its first callback.
func (s *vmState) recoverCreate(id uint32, st *streamState) {
	r := recover()
	if r == nil {
		return
	}
	p := s.reportPanic(cbContextCreate, id, r)
	if st != nil {
		st.ctx = nil
		st.failed = true
		st.replyOwed = true
		st.owed = p
	}
}

// recoverCallout is deferred by proxy_on_http_call_response; st is the
// calling stream, or nil when a plugin context made the call.
func (s *vmState) recoverCallout(caller uint32, st *streamState) {
	r := recover()
	if r == nil {
		return
	}
	p := s.reportPanic(cbHttpCallResponse, caller, r)
	if st != nil {
		st.failed = true
		s.replyPanic(p, abi.StreamRequest)
	}
}

// afterFailure answers a callback of a stream that already failed: the
// reply a creation panic owes, else pass-through.
func (s *vmState) afterFailure(id uint32, st *streamState, cb callback) types.Action {
	if st.replyOwed && cb <= cbRequestTrailers {
		st.replyOwed = false
		s.replyPanic(st.owed, streamOf(cb))
		return types.ActionPause
	}
	return types.ActionContinue
}

func (s *vmState) replyPanic(p Panic, stream uint32) {
	status, headers, body := panicReply(p)
	if SendHttpResponse(status, headers, body, -1) != nil {
		hCloseStream(stream)
	}
}

func panicReply(p Panic) (status uint32, headers [][2]string, body []byte) {
	h := panicHandler
	if h == nil {
		return DefaultPanicReply(p)
	}
	defer func() {
		if recover() != nil {
			status, headers, body = DefaultPanicReply(p)
		}
	}()
	return h(p)
}

func streamOf(cb callback) uint32 {
	if cb >= cbResponseHeaders && cb <= cbResponseTrailers {
		return abi.StreamResponse
	}
	return abi.StreamRequest
}

// shortStack drops the recovery frames (everything up to the runtime's
// panic frame) and keeps at most 2 KiB of what follows.
func shortStack(st []byte) string {
	if i := bytes.Index(st, []byte("\npanic(")); i >= 0 {
		rest := st[i+1:]
		// Skip the panic( line and its file line.
		for range 2 {
			if j := bytes.IndexByte(rest, '\n'); j >= 0 {
				rest = rest[j+1:]
			}
		}
		st = rest
	}
	if len(st) > 2048 {
		st = st[:2048]
	}
	return string(st)
}

// describe renders a panic value without fmt.
func describe(r any) (out string) {
	defer func() {
		if recover() != nil {
			out = "a panic value whose Error or String method panicked"
		}
	}()
	switch v := r.(type) {
	case string:
		return v
	case error:
		return v.Error()
	case interface{ String() string }:
		return v.String()
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case uint32:
		return strconv.FormatUint(uint64(v), 10)
	case bool:
		return strconv.FormatBool(v)
	}
	return "a panic value of a type without Error or String"
}
