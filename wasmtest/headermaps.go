package wasmtest

// Header map host calls (shared/proxy-wasm.md 1.5, 3.2). Which map a call
// reaches follows Envoy's Context::getMap (writes, and the size) and
// getConstMap (reads): request headers only in their own callback or while
// paused there, never in response callbacks; in proxy_on_log the request
// and response headers and the response trailers are read-only; maps 6 and 7
// (the callout response) only inside proxy_on_http_call_response.

// readMap returns the map a read of type t sees, or nil when the map is not
// available; inLog reports the access-log phase (a missing map is then
// NOT_FOUND rather than BAD_ARGUMENT).
func (v *vm) readMap(t uint32) (m *hmap, inLog bool) {
	_, s := v.context()
	switch t {
	case mapRequestHeaders, mapRequestTrailers, mapResponseHeaders, mapResponseTrailers:
		if s == nil {
			return nil, false
		}
		if s.inLog {
			switch t {
			case mapRequestHeaders:
				return &s.req.hdr, true
			case mapResponseHeaders:
				if s.respBegun {
					return &s.resp.hdr, true
				}
			case mapResponseTrailers:
				if s.resp.hasTrl {
					return &s.resp.trl, true
				}
			}
			return nil, true
		}
		return s.liveMap(t, false), false
	case mapCallResponseHeaders:
		if v.callResp != nil {
			return &v.callResp.headers, false
		}
	case mapCallResponseTrailer:
		if v.callResp != nil && len(v.callResp.trailers) > 0 {
			return &v.callResp.trailers, false
		}
	}
	return nil, false
}

// writeMap returns the map a write (or a size query) of type t reaches.
func (v *vm) writeMap(t uint32) *hmap {
	_, s := v.context()
	if s == nil || s.inLog || s.ended {
		return nil
	}
	switch t {
	case mapRequestHeaders, mapRequestTrailers, mapResponseHeaders, mapResponseTrailers:
		return s.liveMap(t, true)
	}
	return nil
}

// liveMap is the map of a stream outside the log phase. Trailers that do
// not exist yet may be created from a body callback that ends the stream.
func (s *stream) liveMap(t uint32, create bool) *hmap {
	switch t {
	case mapRequestHeaders:
		if s.req.hdrOK {
			return &s.req.hdr
		}
	case mapResponseHeaders:
		if s.resp.hdrOK {
			return &s.resp.hdr
		}
	case mapRequestTrailers, mapResponseTrailers:
		d := s.dir(t == mapResponseTrailers)
		if d.trlOK {
			return &d.trl
		}
		if create && d.eosBody && !d.hasTrl {
			d.hasTrl = true
			d.trlOK = true
			d.trl = hmap{}
			return &d.trl
		}
	}
	return nil
}

// proxy_get_header_map_pairs(type, ret_ptr, ret_size)
func hostGetHeaderMapPairs(v *vm, s []uint64) {
	t, pp, sp := uint32(s[0]), uint32(s[1]), uint32(s[2])
	if t > mapMax {
		s[0] = statusBadArgument
		return
	}
	m, _ := v.readMap(t)
	if m == nil {
		s[0] = uint64(v.setOut(pp, sp, 0, 0))
		return
	}
	s[0] = uint64(v.outPairs(*m, pp, sp))
}

// proxy_set_header_map_pairs(type, ptr, size): replaces the whole map. A
// malformed map, or one over the pair format's limits, is refused with
// BAD_ARGUMENT and the map is left as it was (Envoy would empty it and
// answer OK).
func hostSetHeaderMapPairs(v *vm, s []uint64) {
	t, p, n := uint32(s[0]), uint32(s[1]), uint32(s[2])
	if t > mapMax {
		s[0] = statusBadArgument
		return
	}
	b, ok := v.read(p, n)
	if !ok {
		s[0] = statusInvalidMemoryAccess
		return
	}
	m := v.writeMap(t)
	if m == nil {
		s[0] = statusBadArgument
		return
	}
	pm, ok := parsePairs(b)
	if !ok {
		v.h.logs.add(v.index, v.name, LogWarn, "proxy_set_header_map_pairs: refused a malformed map, or one over 1024 pairs or 1 MiB; the map is unchanged")
		s[0] = statusBadArgument
		return
	}
	*m = pm
	s[0] = statusOK
}

// proxy_get_header_map_size(type, ret): Envoy's byteSize of a writable map.
func hostGetHeaderMapSize(v *vm, s []uint64) {
	t, ret := uint32(s[0]), uint32(s[1])
	if t > mapMax {
		s[0] = statusBadArgument
		return
	}
	m := v.writeMap(t)
	if m == nil {
		s[0] = statusBadArgument
		return
	}
	if !v.putU32(ret, uint32(m.byteSize())) {
		s[0] = statusInvalidMemoryAccess
		return
	}
	s[0] = statusOK
}

// proxy_get_header_map_value(type, key_ptr, key_size, ret_ptr, ret_size):
// the first value of a name.
func hostGetHeaderMapValue(v *vm, s []uint64) {
	t, kp, kn, pp, sp := uint32(s[0]), uint32(s[1]), uint32(s[2]), uint32(s[3]), uint32(s[4])
	if t > mapMax {
		s[0] = statusBadArgument
		return
	}
	key, ok := v.read(kp, kn)
	if !ok {
		s[0] = statusInvalidMemoryAccess
		return
	}
	m, inLog := v.readMap(t)
	if m == nil {
		if inLog {
			s[0] = statusNotFound
		} else {
			s[0] = statusBadArgument
		}
		return
	}
	val, found := m.getFold(key)
	if !found {
		s[0] = statusNotFound
		return
	}
	s[0] = uint64(v.outString(val, pp, sp))
}

// proxy_add_header_map_value(type, key_ptr, key_size, value_ptr, value_size)
func hostAddHeaderMapValue(v *vm, s []uint64) {
	hostWriteHeader(v, s, func(m *hmap, k, val string) { m.add(k, val) })
}

// proxy_replace_header_map_value: sets a name to one value.
func hostReplaceHeaderMapValue(v *vm, s []uint64) {
	hostWriteHeader(v, s, func(m *hmap, k, val string) { m.replace(k, val) })
}

// hostWriteHeader runs an add or a replace. A write that would take the
// map over the pair format's limits (it could no longer be handed to the
// guest, nor set back) is refused with BAD_ARGUMENT, the map unchanged.
func hostWriteHeader(v *vm, s []uint64, op func(m *hmap, k, val string)) {
	t, kp, kn, vp, vn := uint32(s[0]), uint32(s[1]), uint32(s[2]), uint32(s[3]), uint32(s[4])
	if t > mapMax {
		s[0] = statusBadArgument
		return
	}
	key, ok1 := v.read(kp, kn)
	val, ok2 := v.read(vp, vn)
	if !ok1 || !ok2 {
		s[0] = statusInvalidMemoryAccess
		return
	}
	m := v.writeMap(t)
	if m == nil {
		s[0] = statusBadArgument
		return
	}
	before := len(*m)
	grown := m.pairsSize() + 10 + len(key) + len(val)
	if before == 0 {
		grown += 4
	}
	if before+1 > maxPairsCount || grown > maxPairsSize {
		// Over the limits only if the write adds a pair; a replace of an
		// existing name is checked on its result.
		next := append(hmap(nil), *m...)
		op(&next, lowerBytes(key), string(val))
		if !next.fits() {
			v.h.logs.add(v.index, v.name, LogWarn, "proxy_add/replace_header_map_value: refused; the map would pass 1024 pairs or 1 MiB, and it is unchanged")
			s[0] = statusBadArgument
			return
		}
		*m = next
		s[0] = statusOK
		return
	}
	op(m, lowerBytes(key), string(val))
	s[0] = statusOK
}

// proxy_remove_header_map_value(type, key_ptr, key_size): removes every value.
func hostRemoveHeaderMapValue(v *vm, s []uint64) {
	t, kp, kn := uint32(s[0]), uint32(s[1]), uint32(s[2])
	if t > mapMax {
		s[0] = statusBadArgument
		return
	}
	key, ok := v.read(kp, kn)
	if !ok {
		s[0] = statusInvalidMemoryAccess
		return
	}
	m := v.writeMap(t)
	if m == nil {
		s[0] = statusBadArgument
		return
	}
	m.remove(lowerBytes(key))
	s[0] = statusOK
}
