//go:build !wasip1

package proxywasm

import "github.com/tokentriage/tokentriage/filter/proxywasm/internal/nativehost"

// The native stand-in's host calls: the same names and signatures as
// hostcall_wasip1.go, served by the emulated VM that is running
// (nativehost.Current). Outside a callback they return statusNoHost.

func host() nativehost.Host {
	if v := nativehost.Current(); v != nil {
		hostCalls.Add(1)
		return v.Host
	}
	return nil
}

// onHost runs call on the host that is running; statusNoHost outside a
// callback.
func onHost(call func(h nativehost.Host) uint32) uint32 {
	if h := host(); h != nil {
		return call(h)
	}
	return statusNoHost
}

func hLog(level uint32, msg string) uint32 {
	return onHost(func(h nativehost.Host) uint32 { return h.Log(level, msg) })
}

func hGetLogLevel() (uint32, uint32) {
	if h := host(); h != nil {
		return h.GetLogLevel()
	}
	return 0, statusNoHost
}

func hSetTickPeriod(ms uint32) uint32 {
	return onHost(func(h nativehost.Host) uint32 { return h.SetTickPeriod(ms) })
}

func hSetEffectiveContext(id uint32) uint32 {
	return onHost(func(h nativehost.Host) uint32 { return h.SetEffectiveContext(id) })
}

func hDone() uint32 {
	return onHost(func(h nativehost.Host) uint32 { return h.Done() })
}

func hGetBufferBytes(bt, start, max uint32, dst []byte) ([]byte, uint32) {
	if h := host(); h != nil {
		b, st := h.GetBufferBytes(bt, start, max)
		if st == 0 && len(b) > 0 && len(b) <= len(dst) {
			b = dst[:copy(dst, b)]
		}
		return b, st
	}
	return nil, statusNoHost
}

func hSetBufferBytes(bt, start, size uint32, data []byte) uint32 {
	return onHost(func(h nativehost.Host) uint32 { return h.SetBufferBytes(bt, start, size, data) })
}

func hGetBufferStatus(bt uint32) (length, flags, status uint32) {
	if h := host(); h != nil {
		return h.GetBufferStatus(bt)
	}
	return 0, 0, statusNoHost
}

func hGetHeaderMapPairs(mt uint32) ([]byte, uint32) {
	if h := host(); h != nil {
		return h.GetHeaderMapPairs(mt)
	}
	return nil, statusNoHost
}

func hSetHeaderMapPairs(mt uint32, data []byte) uint32 {
	return onHost(func(h nativehost.Host) uint32 { return h.SetHeaderMapPairs(mt, data) })
}

func hGetHeaderMapSize(mt uint32) (uint32, uint32) {
	if h := host(); h != nil {
		return h.GetHeaderMapSize(mt)
	}
	return 0, statusNoHost
}

func hGetHeaderMapValue(mt uint32, key string) ([]byte, uint32) {
	if h := host(); h != nil {
		return h.GetHeaderMapValue(mt, key)
	}
	return nil, statusNoHost
}

func hAddHeaderMapValue(mt uint32, key, value string) uint32 {
	return onHost(func(h nativehost.Host) uint32 { return h.AddHeaderMapValue(mt, key, value) })
}

func hReplaceHeaderMapValue(mt uint32, key, value string) uint32 {
	return onHost(func(h nativehost.Host) uint32 { return h.ReplaceHeaderMapValue(mt, key, value) })
}

func hRemoveHeaderMapValue(mt uint32, key string) uint32 {
	return onHost(func(h nativehost.Host) uint32 { return h.RemoveHeaderMapValue(mt, key) })
}

func hContinueStream(stream uint32) uint32 {
	return onHost(func(h nativehost.Host) uint32 { return h.ContinueStream(stream) })
}

func hCloseStream(stream uint32) uint32 {
	return onHost(func(h nativehost.Host) uint32 { return h.CloseStream(stream) })
}

func hSendLocalResponse(status uint32, details string, body, headers []byte, grpcStatus int32) uint32 {
	return onHost(func(h nativehost.Host) uint32 { return h.SendLocalResponse(status, details, body, headers, grpcStatus) })
}

func hHttpCall(upstream string, headers, body, trailers []byte, timeoutMs uint32) (uint32, uint32) {
	if h := host(); h != nil {
		return h.HttpCall(upstream, headers, body, trailers, timeoutMs)
	}
	return 0, statusNoHost
}

// hGetSharedData lets other emulated VMs run while the store answers, the
// interleaving real workers have (nativehost's package comment).
func hGetSharedData(key string, dst []byte) ([]byte, uint32, uint32) {
	v := nativehost.Current()
	if v == nil {
		return nil, 0, statusNoHost
	}
	hostCalls.Add(1)
	nativehost.Release(v)
	val, cas, st := v.Host.GetSharedData(key)
	nativehost.Reacquire(v)
	if st == 0 && len(val) > 0 && len(val) <= len(dst) {
		val = dst[:copy(dst, val)]
	}
	return val, cas, st
}

func hSetSharedData(key string, value []byte, cas uint32) uint32 {
	v := nativehost.Current()
	if v == nil {
		return statusNoHost
	}
	hostCalls.Add(1)
	nativehost.Release(v)
	st := v.Host.SetSharedData(key, value, cas)
	nativehost.Reacquire(v)
	return st
}

func hDefineMetric(metricType uint32, name string) (uint32, uint32) {
	if h := host(); h != nil {
		return h.DefineMetric(metricType, name)
	}
	return 0, statusNoHost
}

func hIncrementMetric(id uint32, delta int64) uint32 {
	return onHost(func(h nativehost.Host) uint32 { return h.IncrementMetric(id, delta) })
}

func hRecordMetric(id uint32, value uint64) uint32 {
	return onHost(func(h nativehost.Host) uint32 { return h.RecordMetric(id, value) })
}

func hGetMetric(id uint32) (uint64, uint32) {
	if h := host(); h != nil {
		return h.GetMetric(id)
	}
	return 0, statusNoHost
}

func hGetProperty(path []byte) ([]byte, uint32) {
	if h := host(); h != nil {
		return h.GetProperty(path)
	}
	return nil, statusNoHost
}

func hSetProperty(path, value []byte) uint32 {
	return onHost(func(h nativehost.Host) uint32 { return h.SetProperty(path, value) })
}

func hCallForeignFunction(name string, args []byte) ([]byte, uint32) {
	if h := host(); h != nil {
		return h.CallForeignFunction(name, args)
	}
	return nil, statusNoHost
}

func hGetStatus() (uint32, []byte, uint32) {
	if h := host(); h != nil {
		return h.GetStatus()
	}
	return 0, nil, statusNoHost
}
