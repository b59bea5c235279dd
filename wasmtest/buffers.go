package wasmtest

// Buffer host calls (shared/proxy-wasm.md 1.7). An HTTP body is reachable in
// its own body callback and, after that callback paused, until the stream
// continues; elsewhere it reads as empty. The callout body (4) exists only
// inside proxy_on_http_call_response and the plugin configuration (7) only
// while the root context is created, started and configured: NOT_FOUND
// otherwise.

// buffer returns the bytes of buffer t, the body slice when it may be
// written, and a status when it does not exist.
func (v *vm) buffer(t uint32) (data []byte, body *direction, st status) {
	if t > bufMax {
		return nil, nil, statusBadArgument
	}
	switch t {
	case bufRequestBody, bufResponseBody:
		_, s := v.context()
		if s == nil || s.ended {
			return nil, nil, statusOK
		}
		d := s.dir(t == bufResponseBody)
		if d.bodyOK && !s.inLog {
			return d.body, d, statusOK
		}
		return nil, nil, statusOK
	case bufCallResponseBody:
		if v.callResp == nil {
			return nil, nil, statusNotFound
		}
		return v.callResp.body, nil, statusOK
	case bufVMConfig:
		return v.h.cfg.VMConfig, nil, statusOK
	case bufPluginConfig:
		if !v.pluginCfg {
			return nil, nil, statusNotFound
		}
		return v.h.cfg.PluginConfig, nil, statusOK
	}
	return nil, nil, statusOK
}

// proxy_get_buffer_bytes(type, start, max_size, ret_ptr, ret_size)
func hostGetBufferBytes(v *vm, s []uint64) {
	t, start, max, pp, sp := uint32(s[0]), uint32(s[1]), uint32(s[2]), uint32(s[3]), uint32(s[4])
	data, _, st := v.buffer(t)
	if st != statusOK {
		s[0] = uint64(st)
		return
	}
	if start+max < start {
		s[0] = statusBadArgument
		return
	}
	if int64(start) >= int64(len(data)) {
		s[0] = uint64(v.setOut(pp, sp, 0, 0))
		return
	}
	end := int64(start) + int64(max)
	if end > int64(len(data)) {
		end = int64(len(data))
	}
	s[0] = uint64(v.outBytes(data[start:end], pp, sp))
}

// proxy_set_buffer_bytes(type, start, size, ptr, len), Envoy's
// Buffer::copyFrom: (0,0) prepends, (0, ≥len) replaces, start ≥ len appends,
// anything else is BAD_ARGUMENT.
func hostSetBufferBytes(v *vm, s []uint64) {
	t, start, size, p, n := uint32(s[0]), uint32(s[1]), uint32(s[2]), uint32(s[3]), uint32(s[4])
	_, d, st := v.buffer(t)
	if st != statusOK {
		s[0] = uint64(st)
		return
	}
	in, ok := v.read(p, n)
	if !ok {
		s[0] = statusInvalidMemoryAccess
		return
	}
	if d == nil {
		s[0] = statusBadArgument
		return
	}
	l := uint32(len(d.body))
	switch {
	case start == 0 && size == 0:
		nb := make([]byte, 0, len(in)+len(d.body))
		nb = append(append(nb, in...), d.body...)
		d.body = nb
	case start == 0 && size >= l:
		d.body = append([]byte(nil), in...)
	case start >= l:
		nb := make([]byte, 0, len(in)+len(d.body))
		nb = append(append(nb, d.body...), in...)
		d.body = nb
	default:
		s[0] = statusBadArgument
		return
	}
	d.changed = true
	s[0] = statusOK
}

// proxy_get_buffer_status(type, ret_len, ret_flags)
func hostGetBufferStatus(v *vm, s []uint64) {
	t, lp, fp := uint32(s[0]), uint32(s[1]), uint32(s[2])
	data, _, st := v.buffer(t)
	if st != statusOK {
		s[0] = uint64(st)
		return
	}
	if !v.putU32(lp, uint32(len(data))) || !v.putU32(fp, 0) {
		s[0] = statusInvalidMemoryAccess
		return
	}
	s[0] = statusOK
}
