package wasmtest

import (
	"strings"
	"unicode"
)

// Stream control host calls. Everything here is deferred, as in Envoy: the
// call records an action and the stream acts on it once the VM call that
// made it has returned (shared/proxy-wasm.md 3.2).

func (v *vm) enqueue(s *stream, a action) {
	if s.ended {
		return
	}
	s.actions = append(s.actions, a)
	v.touch(s)
}

// proxy_continue_stream(type)
func hostContinueStream(v *vm, s []uint64) {
	t := uint32(s[0])
	switch t {
	case streamRequest, streamResponse:
	case streamDownstream:
		s[0] = statusOK
		return
	case streamUpstream:
		s[0] = statusUnimplemented
		return
	default:
		s[0] = statusBadArgument
		return
	}
	_, st := v.context()
	if st != nil && !st.inLog {
		kind := actContinueRequest
		if t == streamResponse {
			kind = actContinueResponse
		}
		v.enqueue(st, action{kind: kind})
		// Envoy's Context::continueStream drops the request maps and body
		// whichever direction continues.
		st.req.hdrOK, st.req.bodyOK, st.req.trlOK = false, false, false
	}
	s[0] = statusOK
}

// proxy_close_stream(type): resets the stream (details wasm_close_stream).
func hostCloseStream(v *vm, s []uint64) {
	t := uint32(s[0])
	switch t {
	case streamRequest, streamResponse:
		if _, st := v.context(); st != nil && !st.inLog {
			v.enqueue(st, action{kind: actClose})
		}
	case streamDownstream, streamUpstream:
	default:
		s[0] = statusBadArgument
		return
	}
	s[0] = statusOK
}

// proxy_send_local_response(status, details_ptr, details_size, body_ptr,
// body_size, headers_ptr, headers_size, grpc_status)
func hostSendLocalResponse(v *vm, s []uint64) {
	code := uint32(s[0])
	details, ok1 := v.read(uint32(s[1]), uint32(s[2]))
	body, ok2 := v.read(uint32(s[3]), uint32(s[4]))
	hdrs, ok3 := v.read(uint32(s[5]), uint32(s[6]))
	grpc := int32(uint32(s[7]))
	if !ok1 || !ok2 || !ok3 {
		s[0] = statusInvalidMemoryAccess
		return
	}
	_, st := v.context()
	if st == nil {
		if v.rootLocal {
			s[0] = statusBadArgument
			return
		}
		v.rootLocal = true
		s[0] = statusOK
		return
	}
	if st.localHold {
		s[0] = statusBadArgument
		return
	}
	lh, ok := parsePairs(hdrs)
	if !ok {
		s[0] = statusBadArgument // never a reply with its headers silently dropped
		return
	}
	st.localHold = true
	if grpc < 0 || grpc > 16 {
		grpc = -1
	}
	lr := &localReply{
		status:  int(code),
		body:    append([]byte(nil), body...),
		headers: lh,
		details: strings.Map(func(r rune) rune {
			if unicode.IsSpace(r) {
				return '_'
			}
			return r
		}, string(details)),
		grpc: grpc,
	}
	if !st.inLog {
		v.enqueue(st, action{kind: actLocalReply, reply: lr})
	}
	s[0] = statusOK
}

// proxy_set_effective_context(context_id)
func hostSetEffectiveContext(v *vm, s []uint64) {
	id := uint32(s[0])
	if id == v.rootID && v.rootAlive {
		v.effID, v.eff = id, nil
		s[0] = statusOK
		return
	}
	st, ok := v.streams[id]
	if !ok || st.ended {
		s[0] = statusBadArgument
		return
	}
	v.effID, v.eff = id, st
	v.counts = &st.counts
	s[0] = statusOK
}

// proxy_done(): only a root context that answered proxy_on_done with false
// may call it.
func hostDone(v *vm, s []uint64) {
	if !v.rootHold {
		s[0] = statusNotFound
		return
	}
	v.rootHold = false
	if v.rootDone != nil {
		close(v.rootDone)
		v.rootDone = nil
	}
	s[0] = statusOK
}

// proxy_get_status(ret_code, ret_msg_ptr, ret_msg_size): the status of the
// last callout failure, (11, "reset"), inside its callback.
func hostGetStatus(v *vm, s []uint64) {
	cp, pp, sp := uint32(s[0]), uint32(s[1]), uint32(s[2])
	if !v.putU32(cp, v.statusCod) {
		s[0] = statusInvalidMemoryAccess
		return
	}
	s[0] = uint64(v.outString(v.statusMsg, pp, sp))
}

// gRPC calls need an Envoy gRPC client; this host has none.
func hostGrpcUnsupported(v *vm, s []uint64) {
	v.h.logs.add(v.index, v.name, LogWarn, "gRPC calls are not supported by this host")
	s[0] = statusUnimplemented
}
