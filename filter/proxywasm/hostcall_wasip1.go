//go:build wasip1

package proxywasm

import "unsafe"

// The env.proxy_* imports (fact sheet 1.3). A string parameter travels as
// (pointer, length); every uint8_t** out-parameter is an unsafe.Pointer to a
// *byte the host fills with the address proxy_on_memory_allocate returned.
// Imports nothing calls are dropped by the linker, so a module imports only
// what its filter uses.

//go:wasmimport env proxy_log
func proxyLog(level uint32, msg string) uint32

//go:wasmimport env proxy_get_log_level
func proxyGetLogLevel(retLevel *uint32) uint32

//go:wasmimport env proxy_set_tick_period_milliseconds
func proxySetTickPeriodMilliseconds(period uint32) uint32

//go:wasmimport env proxy_set_effective_context
func proxySetEffectiveContext(contextID uint32) uint32

//go:wasmimport env proxy_done
func proxyDone() uint32

//go:wasmimport env proxy_get_buffer_bytes
func proxyGetBufferBytes(bt, start, maxSize uint32, retData unsafe.Pointer, retSize *uint32) uint32

//go:wasmimport env proxy_set_buffer_bytes
func proxySetBufferBytes(bt, start, size uint32, data *byte, dataSize uint32) uint32

//go:wasmimport env proxy_get_buffer_status
func proxyGetBufferStatus(bt uint32, retLength *uint32, retFlags *uint32) uint32

//go:wasmimport env proxy_get_header_map_pairs
func proxyGetHeaderMapPairs(mt uint32, retData unsafe.Pointer, retSize *uint32) uint32

//go:wasmimport env proxy_set_header_map_pairs
func proxySetHeaderMapPairs(mt uint32, data *byte, size uint32) uint32

//go:wasmimport env proxy_get_header_map_size
func proxyGetHeaderMapSize(mt uint32, retSize *uint32) uint32

//go:wasmimport env proxy_get_header_map_value
func proxyGetHeaderMapValue(mt uint32, key string, retData unsafe.Pointer, retSize *uint32) uint32

//go:wasmimport env proxy_add_header_map_value
func proxyAddHeaderMapValue(mt uint32, key string, value string) uint32

//go:wasmimport env proxy_replace_header_map_value
func proxyReplaceHeaderMapValue(mt uint32, key string, value string) uint32

//go:wasmimport env proxy_remove_header_map_value
func proxyRemoveHeaderMapValue(mt uint32, key string) uint32

//go:wasmimport env proxy_continue_stream
func proxyContinueStream(stream uint32) uint32

//go:wasmimport env proxy_close_stream
func proxyCloseStream(stream uint32) uint32

//go:wasmimport env proxy_send_local_response
func proxySendLocalResponse(status uint32, details string, body *byte, bodySize uint32,
	headers *byte, headersSize uint32, grpcStatus int32) uint32

//go:wasmimport env proxy_http_call
func proxyHttpCall(upstream string, headers *byte, headersSize uint32, body *byte, bodySize uint32,
	trailers *byte, trailersSize uint32, timeoutMs uint32, retCallID *uint32) uint32

//go:wasmimport env proxy_get_shared_data
func proxyGetSharedData(key string, retValue unsafe.Pointer, retSize *uint32, retCas *uint32) uint32

//go:wasmimport env proxy_set_shared_data
func proxySetSharedData(key string, value *byte, size uint32, cas uint32) uint32

//go:wasmimport env proxy_define_metric
func proxyDefineMetric(metricType uint32, name string, retID *uint32) uint32

//go:wasmimport env proxy_increment_metric
func proxyIncrementMetric(id uint32, delta int64) uint32

//go:wasmimport env proxy_record_metric
func proxyRecordMetric(id uint32, value uint64) uint32

//go:wasmimport env proxy_get_metric
func proxyGetMetric(id uint32, retValue *uint64) uint32

//go:wasmimport env proxy_get_property
func proxyGetProperty(path *byte, pathSize uint32, retData unsafe.Pointer, retSize *uint32) uint32

//go:wasmimport env proxy_set_property
func proxySetProperty(path *byte, pathSize uint32, value *byte, valueSize uint32) uint32

//go:wasmimport env proxy_call_foreign_function
func proxyCallForeignFunction(name string, args *byte, argsSize uint32, retData unsafe.Pointer, retSize *uint32) uint32

//go:wasmimport env proxy_get_status
func proxyGetStatus(retCode *uint32, retMsg unsafe.Pointer, retMsgSize *uint32) uint32

// out holds the host calls' out-parameters. A pointer to a local passed to
// a wasmimport escapes, so locals would cost a heap allocation per call; a
// VM runs one callback at a time and the allocator the host may call back
// into during an import never touches out, so one package-level set serves.
// Every h* function copies what it needs out of it before returning.
var out struct {
	p          *byte
	n, n2, cas uint32
	id         uint32
	v          uint64
}

// The h* functions below are the binding's host calls: the same names and
// signatures as the native stand-in's (hostcall_native.go). Each counts
// itself. Byte results are blocks proxy_on_memory_allocate handed out for
// this call, owned by the caller.

func hLog(level uint32, msg string) uint32 {
	hostCalls.Add(1)
	return proxyLog(level, msg)
}

func hGetLogLevel() (uint32, uint32) {
	hostCalls.Add(1)
	st := proxyGetLogLevel(&out.n)
	return out.n, st
}

func hSetTickPeriod(ms uint32) uint32 {
	hostCalls.Add(1)
	return proxySetTickPeriodMilliseconds(ms)
}

func hSetEffectiveContext(id uint32) uint32 {
	hostCalls.Add(1)
	return proxySetEffectiveContext(id)
}

func hDone() uint32 {
	hostCalls.Add(1)
	return proxyDone()
}

// hGetBufferBytes receives the bytes into dst when they fit (alloc.go).
func hGetBufferBytes(bt, start, max uint32, dst []byte) ([]byte, uint32) {
	hostCalls.Add(1)
	out.p, out.n = nil, 0
	if len(dst) > 0 {
		allocSteer = dst
	}
	st := proxyGetBufferBytes(bt, start, max, unsafe.Pointer(&out.p), &out.n)
	allocSteer = nil
	return receivedInto(st, dst), st
}

func hSetBufferBytes(bt, start, size uint32, data []byte) uint32 {
	hostCalls.Add(1)
	return proxySetBufferBytes(bt, start, size, unsafe.SliceData(data), uint32(len(data)))
}

func hGetBufferStatus(bt uint32) (length, flags, status uint32) {
	hostCalls.Add(1)
	status = proxyGetBufferStatus(bt, &out.n, &out.n2)
	return out.n, out.n2, status
}

func hGetHeaderMapPairs(mt uint32) ([]byte, uint32) {
	hostCalls.Add(1)
	out.p, out.n = nil, 0
	st := proxyGetHeaderMapPairs(mt, unsafe.Pointer(&out.p), &out.n)
	return received(st), st
}

func hSetHeaderMapPairs(mt uint32, data []byte) uint32 {
	hostCalls.Add(1)
	return proxySetHeaderMapPairs(mt, unsafe.SliceData(data), uint32(len(data)))
}

func hGetHeaderMapSize(mt uint32) (uint32, uint32) {
	hostCalls.Add(1)
	st := proxyGetHeaderMapSize(mt, &out.n)
	return out.n, st
}

func hGetHeaderMapValue(mt uint32, key string) ([]byte, uint32) {
	hostCalls.Add(1)
	out.p, out.n = nil, 0
	st := proxyGetHeaderMapValue(mt, key, unsafe.Pointer(&out.p), &out.n)
	return received(st), st
}

func hAddHeaderMapValue(mt uint32, key, value string) uint32 {
	hostCalls.Add(1)
	return proxyAddHeaderMapValue(mt, key, value)
}

func hReplaceHeaderMapValue(mt uint32, key, value string) uint32 {
	hostCalls.Add(1)
	return proxyReplaceHeaderMapValue(mt, key, value)
}

func hRemoveHeaderMapValue(mt uint32, key string) uint32 {
	hostCalls.Add(1)
	return proxyRemoveHeaderMapValue(mt, key)
}

func hContinueStream(stream uint32) uint32 {
	hostCalls.Add(1)
	return proxyContinueStream(stream)
}

func hCloseStream(stream uint32) uint32 {
	hostCalls.Add(1)
	return proxyCloseStream(stream)
}

func hSendLocalResponse(status uint32, details string, body, headers []byte, grpcStatus int32) uint32 {
	hostCalls.Add(1)
	return proxySendLocalResponse(status, details, unsafe.SliceData(body), uint32(len(body)),
		unsafe.SliceData(headers), uint32(len(headers)), grpcStatus)
}

func hHttpCall(upstream string, headers, body, trailers []byte, timeoutMs uint32) (uint32, uint32) {
	hostCalls.Add(1)
	st := proxyHttpCall(upstream, unsafe.SliceData(headers), uint32(len(headers)),
		unsafe.SliceData(body), uint32(len(body)),
		unsafe.SliceData(trailers), uint32(len(trailers)), timeoutMs, &out.id)
	return out.id, st
}

// hGetSharedData receives the value into dst when it fits (alloc.go).
func hGetSharedData(key string, dst []byte) ([]byte, uint32, uint32) {
	hostCalls.Add(1)
	out.p, out.n, out.cas = nil, 0, 0
	if len(dst) > 0 {
		allocSteer = dst
	}
	st := proxyGetSharedData(key, unsafe.Pointer(&out.p), &out.n, &out.cas)
	allocSteer = nil
	return receivedInto(st, dst), out.cas, st
}

func hSetSharedData(key string, value []byte, cas uint32) uint32 {
	hostCalls.Add(1)
	return proxySetSharedData(key, unsafe.SliceData(value), uint32(len(value)), cas)
}

func hDefineMetric(metricType uint32, name string) (uint32, uint32) {
	hostCalls.Add(1)
	st := proxyDefineMetric(metricType, name, &out.id)
	return out.id, st
}

func hIncrementMetric(id uint32, delta int64) uint32 {
	hostCalls.Add(1)
	return proxyIncrementMetric(id, delta)
}

func hRecordMetric(id uint32, value uint64) uint32 {
	hostCalls.Add(1)
	return proxyRecordMetric(id, value)
}

func hGetMetric(id uint32) (uint64, uint32) {
	hostCalls.Add(1)
	st := proxyGetMetric(id, &out.v)
	return out.v, st
}

func hGetProperty(path []byte) ([]byte, uint32) {
	hostCalls.Add(1)
	out.p, out.n = nil, 0
	st := proxyGetProperty(unsafe.SliceData(path), uint32(len(path)), unsafe.Pointer(&out.p), &out.n)
	return received(st), st
}

func hSetProperty(path, value []byte) uint32 {
	hostCalls.Add(1)
	return proxySetProperty(unsafe.SliceData(path), uint32(len(path)), unsafe.SliceData(value), uint32(len(value)))
}

func hCallForeignFunction(name string, args []byte) ([]byte, uint32) {
	hostCalls.Add(1)
	out.p, out.n = nil, 0
	st := proxyCallForeignFunction(name, unsafe.SliceData(args), uint32(len(args)), unsafe.Pointer(&out.p), &out.n)
	return received(st), st
}

func hGetStatus() (uint32, []byte, uint32) {
	hostCalls.Add(1)
	out.p, out.n = nil, 0
	st := proxyGetStatus(&out.n2, unsafe.Pointer(&out.p), &out.n)
	return out.n2, received(st), st
}

// received views the block the host wrote into out for a call, and clears
// out.p so the package variable does not keep the block alive; an empty
// result is (nil, 0) and was never allocated.
func received(st uint32) []byte { return receivedInto(st, nil) }

// receivedInto is received for a call steered into dst: a block at dst's
// start is dst[:n], so the caller keeps dst's capacity.
func receivedInto(st uint32, dst []byte) []byte {
	p, n := out.p, out.n
	out.p = nil
	if st != 0 || p == nil || n == 0 {
		return nil
	}
	if len(dst) > 0 && p == &dst[0] && int(n) <= len(dst) {
		return dst[:n]
	}
	return unsafe.Slice(p, n)
}
