package proxywasm

import (
	"math"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"
)

// Bodies follow Envoy's proxy_set_buffer_bytes rules (fact sheet 1.7):
// (0, MaxInt32) replaces, (0, 0) prepends, (MaxInt32, 0) appends. After a
// body callback returns Pause, Envoy buffers, and the next callback's
// bodySize is the whole buffered body.

// GetHttpRequestBody returns up to maxSize bytes of the request body from
// start. Available in OnHttpRequestBody, and while the body is buffered.
func GetHttpRequestBody(start, maxSize int) ([]byte, error) {
	return getBuffer(abi.BufferHttpRequestBody, start, maxSize, nil)
}

// GetHttpRequestBodyInto is GetHttpRequestBody that receives the bytes
// into dst when they fit in cap(dst): body is then dst[:len(body)], and a
// body callback that reads each chunk into the same buffer does not
// allocate. A larger body gets a fresh slice.
func GetHttpRequestBodyInto(start, maxSize int, dst []byte) ([]byte, error) {
	return getBuffer(abi.BufferHttpRequestBody, start, maxSize, dst)
}

// AppendHttpRequestBody appends data to the request body.
func AppendHttpRequestBody(data []byte) error {
	return setBuffer(abi.BufferHttpRequestBody, math.MaxInt32, 0, data)
}

// PrependHttpRequestBody prepends data to the request body.
func PrependHttpRequestBody(data []byte) error {
	return setBuffer(abi.BufferHttpRequestBody, 0, 0, data)
}

// ReplaceHttpRequestBody replaces the request body with data.
func ReplaceHttpRequestBody(data []byte) error {
	return setBuffer(abi.BufferHttpRequestBody, 0, math.MaxInt32, data)
}

// GetHttpResponseBody returns up to maxSize bytes of the response body from
// start.
func GetHttpResponseBody(start, maxSize int) ([]byte, error) {
	return getBuffer(abi.BufferHttpResponseBody, start, maxSize, nil)
}

// GetHttpResponseBodyInto is GetHttpResponseBody that receives the bytes
// into dst when they fit in cap(dst) (see GetHttpRequestBodyInto).
func GetHttpResponseBodyInto(start, maxSize int, dst []byte) ([]byte, error) {
	return getBuffer(abi.BufferHttpResponseBody, start, maxSize, dst)
}

// AppendHttpResponseBody appends data to the response body.
func AppendHttpResponseBody(data []byte) error {
	return setBuffer(abi.BufferHttpResponseBody, math.MaxInt32, 0, data)
}

// PrependHttpResponseBody prepends data to the response body.
func PrependHttpResponseBody(data []byte) error {
	return setBuffer(abi.BufferHttpResponseBody, 0, 0, data)
}

// ReplaceHttpResponseBody replaces the response body with data.
func ReplaceHttpResponseBody(data []byte) error {
	return setBuffer(abi.BufferHttpResponseBody, 0, math.MaxInt32, data)
}

// getBuffer reads a buffer, into dst when it fits in cap(dst).
func getBuffer(bt uint32, start, maxSize int, dst []byte) ([]byte, error) {
	if start < 0 || maxSize < 0 {
		return nil, types.ErrorStatusBadArgument
	}
	b, st := hGetBufferBytes(bt, clamp32(start), clamp32(maxSize), dst[:cap(dst)])
	if st != abi.StatusOK {
		return nil, statusToError(st)
	}
	return b, nil
}

func setBuffer(bt, start, size uint32, data []byte) error {
	return statusToError(hSetBufferBytes(bt, start, size, data))
}

// clamp32 bounds n to [0, MaxInt32], what every host reads as a size.
func clamp32(n int) uint32 {
	if n <= 0 {
		return 0
	}
	if uint64(n) > math.MaxInt32 {
		return math.MaxInt32
	}
	return uint32(n)
}
