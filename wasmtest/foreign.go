package wasmtest

import (
	"bytes"
	"compress/zlib"
	"io"
)

// Foreign functions (proxy_call_foreign_function). Envoy registers, in
// source/extensions/common/wasm/foreign.cc:
//
//	clear_route_cache       here: the stream's route is chosen again, from
//	                        its request headers as they are then
//	compress, uncompress    here: zlib (RFC 1950), as Envoy's zlib
//	                        compress() and uncompress(); a corrupt input is
//	                        SERIALIZATION_FAILURE
//	declare_property,       not here: they take Envoy's own protobuf
//	set_envoy_filter_state, arguments and act on Envoy filter state and
//	sign, verify_signature  keys; NOT_FOUND, as in a host without them
//	expr_create,            not here (nor in Envoy builds without the CEL
//	expr_evaluate,          parser); NOT_FOUND
//	expr_delete
//
// Any other name is NOT_FOUND, as in Envoy.

// maxUncompressed bounds what uncompress produces, so that a small hostile
// input cannot exhaust the host's memory.
const maxUncompressed = 64 << 20

// proxy_call_foreign_function(name_ptr, name_size, args_ptr, args_size,
// ret_ptr, ret_size)
func hostCallForeignFunction(v *vm, s []uint64) {
	name, ok1 := v.read(uint32(s[0]), uint32(s[1]))
	args, ok2 := v.read(uint32(s[2]), uint32(s[3]))
	rp, rs := uint32(s[4]), uint32(s[5])
	if !ok1 || !ok2 {
		s[0] = statusInvalidMemoryAccess
		return
	}
	switch string(name) {
	case "clear_route_cache":
		if _, st := v.context(); st != nil {
			st.rtState = routeUnset
		}
		s[0] = statusOK
	case "compress":
		var b bytes.Buffer
		w := zlib.NewWriter(&b)
		w.Write(args)
		w.Close()
		s[0] = uint64(v.outBytes(b.Bytes(), rp, rs))
	case "uncompress":
		r, err := zlib.NewReader(bytes.NewReader(append([]byte(nil), args...)))
		if err != nil {
			s[0] = statusSerializationFailed
			return
		}
		out, err := io.ReadAll(io.LimitReader(r, maxUncompressed+1))
		if err != nil || len(out) > maxUncompressed {
			s[0] = statusSerializationFailed
			return
		}
		s[0] = uint64(v.outBytes(out, rp, rs))
	default:
		s[0] = statusNotFound
	}
}
