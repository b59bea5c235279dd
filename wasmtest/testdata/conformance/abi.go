// Raw proxy-wasm host calls for the conformance guest: no SDK, so the test
// exercises exactly the ABI the host implements.
package main

import (
	"encoding/binary"
	"unsafe"
)

//go:wasmimport env proxy_log
func proxyLog(level int32, p *byte, n int32) int32

//go:wasmimport env proxy_get_header_map_value
func proxyGetHeaderMapValue(t int32, kp *byte, kn int32, rp unsafe.Pointer, rn *int32) int32

//go:wasmimport env proxy_get_header_map_pairs
func proxyGetHeaderMapPairs(t int32, rp unsafe.Pointer, rn *int32) int32

//go:wasmimport env proxy_set_header_map_pairs
func proxySetHeaderMapPairs(t int32, p *byte, n int32) int32

//go:wasmimport env proxy_get_header_map_size
func proxyGetHeaderMapSize(t int32, ret *int32) int32

//go:wasmimport env proxy_add_header_map_value
func proxyAddHeaderMapValue(t int32, kp *byte, kn int32, vp *byte, vn int32) int32

//go:wasmimport env proxy_replace_header_map_value
func proxyReplaceHeaderMapValue(t int32, kp *byte, kn int32, vp *byte, vn int32) int32

//go:wasmimport env proxy_remove_header_map_value
func proxyRemoveHeaderMapValue(t int32, kp *byte, kn int32) int32

//go:wasmimport env proxy_get_buffer_bytes
func proxyGetBufferBytes(t int32, start int32, max int32, rp unsafe.Pointer, rn *int32) int32

//go:wasmimport env proxy_set_buffer_bytes
func proxySetBufferBytes(t int32, start int32, size int32, p *byte, n int32) int32

//go:wasmimport env proxy_continue_stream
func proxyContinueStream(t int32) int32

//go:wasmimport env proxy_close_stream
func proxyCloseStream(t int32) int32

//go:wasmimport env proxy_send_local_response
func proxySendLocalResponse(code int32, dp *byte, dn int32, bp *byte, bn int32, hp *byte, hn int32, grpc int32) int32

//go:wasmimport env proxy_http_call
func proxyHTTPCall(up *byte, un int32, hp *byte, hn int32, bp *byte, bn int32, tp *byte, tn int32, timeout int32, ret *int32) int32

//go:wasmimport env proxy_set_effective_context
func proxySetEffectiveContext(id int32) int32

//go:wasmimport env proxy_get_status
func proxyGetStatus(code *int32, rp unsafe.Pointer, rn *int32) int32

//go:wasmimport env proxy_get_shared_data
func proxyGetSharedData(kp *byte, kn int32, rp unsafe.Pointer, rn *int32, cas *int32) int32

//go:wasmimport env proxy_set_shared_data
func proxySetSharedData(kp *byte, kn int32, vp *byte, vn int32, cas int32) int32

//go:wasmimport env proxy_define_metric
func proxyDefineMetric(t int32, np *byte, nn int32, ret *int32) int32

//go:wasmimport env proxy_increment_metric
func proxyIncrementMetric(id int32, delta int64) int32

//go:wasmimport env proxy_record_metric
func proxyRecordMetric(id int32, value uint64) int32

//go:wasmimport env proxy_get_metric
func proxyGetMetric(id int32, ret *uint64) int32

//go:wasmimport env proxy_get_property
func proxyGetProperty(pp *byte, pn int32, rp unsafe.Pointer, rn *int32) int32

//go:wasmimport env proxy_set_property
func proxySetProperty(pp *byte, pn int32, vp *byte, vn int32) int32

//go:wasmimport env proxy_set_tick_period_milliseconds
func proxySetTickPeriod(ms int32) int32

//go:wasmimport env proxy_call_foreign_function
func proxyCallForeignFunction(np *byte, nn int32, ap *byte, an int32, rp unsafe.Pointer, rn *int32) int32

//go:wasmimport env proxy_get_log_level
func proxyGetLogLevel(ret *int32) int32

func ptr(s string) *byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.StringData(s)
}

func bptr(b []byte) *byte {
	if len(b) == 0 {
		return nil
	}
	return &b[0]
}

func out(p *byte, n int32) []byte {
	if p == nil || n == 0 {
		return nil
	}
	return unsafe.Slice(p, n)
}

func logf(level int32, msg string) { proxyLog(level, ptr(msg), int32(len(msg))) }

func getHeader(t int32, k string) (string, int32) {
	var p *byte
	var n int32
	st := proxyGetHeaderMapValue(t, ptr(k), int32(len(k)), unsafe.Pointer(&p), &n)
	return string(out(p, n)), st
}

func getPairs(t int32) ([][2]string, int32) {
	var p *byte
	var n int32
	st := proxyGetHeaderMapPairs(t, unsafe.Pointer(&p), &n)
	return decodePairs(out(p, n)), st
}

func decodePairs(b []byte) [][2]string {
	if len(b) < 4 {
		return nil
	}
	n := int(binary.LittleEndian.Uint32(b))
	res := make([][2]string, n)
	q := 4 + 8*n
	for i := 0; i < n; i++ {
		kl := int(binary.LittleEndian.Uint32(b[4+8*i:]))
		vl := int(binary.LittleEndian.Uint32(b[8+8*i:]))
		res[i][0] = string(b[q : q+kl])
		q += kl + 1
		res[i][1] = string(b[q : q+vl])
		q += vl + 1
	}
	return res
}

func encodePairs(ps [][2]string) []byte {
	if len(ps) == 0 {
		return nil
	}
	size := 4
	for _, p := range ps {
		size += 8 + len(p[0]) + len(p[1]) + 2
	}
	b := make([]byte, size)
	binary.LittleEndian.PutUint32(b, uint32(len(ps)))
	q := 4
	for _, p := range ps {
		binary.LittleEndian.PutUint32(b[q:], uint32(len(p[0])))
		binary.LittleEndian.PutUint32(b[q+4:], uint32(len(p[1])))
		q += 8
	}
	for _, p := range ps {
		q += copy(b[q:], p[0]) + 1
		q += copy(b[q:], p[1]) + 1
	}
	return b
}

func addHeader(t int32, k, v string) int32 {
	return proxyAddHeaderMapValue(t, ptr(k), int32(len(k)), ptr(v), int32(len(v)))
}

func replaceHeader(t int32, k, v string) int32 {
	return proxyReplaceHeaderMapValue(t, ptr(k), int32(len(k)), ptr(v), int32(len(v)))
}

func removeHeader(t int32, k string) int32 {
	return proxyRemoveHeaderMapValue(t, ptr(k), int32(len(k)))
}

func getBuffer(t, start, max int32) ([]byte, int32) {
	var p *byte
	var n int32
	st := proxyGetBufferBytes(t, start, max, unsafe.Pointer(&p), &n)
	return out(p, n), st
}

func setBuffer(t, start, size int32, data []byte) int32 {
	return proxySetBufferBytes(t, start, size, bptr(data), int32(len(data)))
}

func sendLocal(code int32, details, body string, hdrs [][2]string) int32 {
	h := encodePairs(hdrs)
	return proxySendLocalResponse(code, ptr(details), int32(len(details)), ptr(body), int32(len(body)), bptr(h), int32(len(h)), -1)
}

func httpCall(cluster string, hdrs [][2]string, body string, timeout int32) (int32, int32) {
	h := encodePairs(hdrs)
	var id int32
	st := proxyHTTPCall(ptr(cluster), int32(len(cluster)), bptr(h), int32(len(h)), ptr(body), int32(len(body)), nil, 0, timeout, &id)
	return id, st
}

func getStatus() (int32, string) {
	var code int32
	var p *byte
	var n int32
	proxyGetStatus(&code, unsafe.Pointer(&p), &n)
	return code, string(out(p, n))
}

func getShared(k string) ([]byte, int32, int32) {
	var p *byte
	var n, cas int32
	st := proxyGetSharedData(ptr(k), int32(len(k)), unsafe.Pointer(&p), &n, &cas)
	return out(p, n), cas, st
}

func setShared(k string, v []byte, cas int32) int32 {
	return proxySetSharedData(ptr(k), int32(len(k)), bptr(v), int32(len(v)), cas)
}

func defineMetric(t int32, name string) (int32, int32) {
	var id int32
	st := proxyDefineMetric(t, ptr(name), int32(len(name)), &id)
	return id, st
}

func getMetric(id int32) (uint64, int32) {
	var v uint64
	st := proxyGetMetric(id, &v)
	return v, st
}

func getProperty(path ...string) ([]byte, int32) {
	var full []byte
	for i, s := range path {
		if i > 0 {
			full = append(full, 0)
		}
		full = append(full, s...)
	}
	var p *byte
	var n int32
	st := proxyGetProperty(bptr(full), int32(len(full)), unsafe.Pointer(&p), &n)
	return out(p, n), st
}

func setProperty(path, value string) int32 {
	return proxySetProperty(ptr(path), int32(len(path)), ptr(value), int32(len(value)))
}

func callForeign(name string, args []byte) ([]byte, int32) {
	var p *byte
	var n int32
	st := proxyCallForeignFunction(ptr(name), int32(len(name)), bptr(args), int32(len(args)), unsafe.Pointer(&p), &n)
	return out(p, n), st
}
