package proxywasm

import (
	"errors"
	"unsafe"

	"github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"
)

// Header maps travel in the pair format (fact sheet 1.5). Keys come back
// lower-cased from Envoy. Request headers are readable in the request
// callbacks only (and in OnHttpStreamDone): once OnHttpRequestHeaders
// returns Continue, Envoy drops them, so cache what later callbacks need.
// The same holds for response headers and each trailer map.

// GetHttpRequestHeaders returns every request header.
func GetHttpRequestHeaders() ([][2]string, error) { return getMap(abi.MapHttpRequestHeaders) }

// ReplaceHttpRequestHeaders replaces every request header with headers.
func ReplaceHttpRequestHeaders(headers [][2]string) error {
	return setMap(abi.MapHttpRequestHeaders, headers)
}

// GetHttpRequestHeader returns the first value of key;
// types.ErrorStatusNotFound when it is absent.
func GetHttpRequestHeader(key string) (string, error) {
	return getMapValue(abi.MapHttpRequestHeaders, key)
}

// RemoveHttpRequestHeader removes every value of key.
func RemoveHttpRequestHeader(key string) error {
	return statusToError(hRemoveHeaderMapValue(abi.MapHttpRequestHeaders, key))
}

// ReplaceHttpRequestHeader sets key to the single value value.
func ReplaceHttpRequestHeader(key, value string) error {
	return statusToError(hReplaceHeaderMapValue(abi.MapHttpRequestHeaders, key, value))
}

// AddHttpRequestHeader adds a value for key, keeping the others.
func AddHttpRequestHeader(key, value string) error {
	return statusToError(hAddHeaderMapValue(abi.MapHttpRequestHeaders, key, value))
}

// GetHttpRequestTrailers returns every request trailer.
func GetHttpRequestTrailers() ([][2]string, error) { return getMap(abi.MapHttpRequestTrailers) }

// ReplaceHttpRequestTrailers replaces every request trailer.
func ReplaceHttpRequestTrailers(trailers [][2]string) error {
	return setMap(abi.MapHttpRequestTrailers, trailers)
}

// GetHttpRequestTrailer returns the first value of a request trailer.
func GetHttpRequestTrailer(key string) (string, error) {
	return getMapValue(abi.MapHttpRequestTrailers, key)
}

// RemoveHttpRequestTrailer removes a request trailer.
func RemoveHttpRequestTrailer(key string) error {
	return statusToError(hRemoveHeaderMapValue(abi.MapHttpRequestTrailers, key))
}

// ReplaceHttpRequestTrailer sets a request trailer to one value.
func ReplaceHttpRequestTrailer(key, value string) error {
	return statusToError(hReplaceHeaderMapValue(abi.MapHttpRequestTrailers, key, value))
}

// AddHttpRequestTrailer adds a request trailer value.
func AddHttpRequestTrailer(key, value string) error {
	return statusToError(hAddHeaderMapValue(abi.MapHttpRequestTrailers, key, value))
}

// GetHttpResponseHeaders returns every response header.
func GetHttpResponseHeaders() ([][2]string, error) { return getMap(abi.MapHttpResponseHeaders) }

// ReplaceHttpResponseHeaders replaces every response header.
func ReplaceHttpResponseHeaders(headers [][2]string) error {
	return setMap(abi.MapHttpResponseHeaders, headers)
}

// GetHttpResponseHeader returns the first value of a response header.
func GetHttpResponseHeader(key string) (string, error) {
	return getMapValue(abi.MapHttpResponseHeaders, key)
}

// RemoveHttpResponseHeader removes a response header.
func RemoveHttpResponseHeader(key string) error {
	return statusToError(hRemoveHeaderMapValue(abi.MapHttpResponseHeaders, key))
}

// ReplaceHttpResponseHeader sets a response header to one value.
func ReplaceHttpResponseHeader(key, value string) error {
	return statusToError(hReplaceHeaderMapValue(abi.MapHttpResponseHeaders, key, value))
}

// AddHttpResponseHeader adds a response header value.
func AddHttpResponseHeader(key, value string) error {
	return statusToError(hAddHeaderMapValue(abi.MapHttpResponseHeaders, key, value))
}

// GetHttpResponseTrailers returns every response trailer.
func GetHttpResponseTrailers() ([][2]string, error) { return getMap(abi.MapHttpResponseTrailers) }

// ReplaceHttpResponseTrailers replaces every response trailer.
func ReplaceHttpResponseTrailers(trailers [][2]string) error {
	return setMap(abi.MapHttpResponseTrailers, trailers)
}

// GetHttpResponseTrailer returns the first value of a response trailer.
func GetHttpResponseTrailer(key string) (string, error) {
	return getMapValue(abi.MapHttpResponseTrailers, key)
}

// RemoveHttpResponseTrailer removes a response trailer.
func RemoveHttpResponseTrailer(key string) error {
	return statusToError(hRemoveHeaderMapValue(abi.MapHttpResponseTrailers, key))
}

// ReplaceHttpResponseTrailer sets a response trailer to one value.
func ReplaceHttpResponseTrailer(key, value string) error {
	return statusToError(hReplaceHeaderMapValue(abi.MapHttpResponseTrailers, key, value))
}

// AddHttpResponseTrailer adds a response trailer value.
func AddHttpResponseTrailer(key, value string) error {
	return statusToError(hAddHeaderMapValue(abi.MapHttpResponseTrailers, key, value))
}

func getMap(mt uint32) ([][2]string, error) {
	data, st := hGetHeaderMapPairs(mt)
	if st != abi.StatusOK {
		return nil, statusToError(st)
	}
	// data is a fresh block this call owns, so the strings may share it.
	return abi.DecodePairsString(owned(data))
}

// ErrMapTooLarge is returned for a map that the pair format cannot carry
// to the host (more than abi.MaxPairs pairs, or more than
// abi.MaxPairsBytes serialized): Envoy's host would replace the map with
// an empty one and answer OK, so the call is never made.
var ErrMapTooLarge = errors.New("proxywasm: the header map is over the pair format's limits (1,024 pairs, 1 MiB), which a host answers by emptying the map; edit it one header at a time")

func setMap(mt uint32, pairs [][2]string) error {
	if len(pairs) > abi.MaxPairs || abi.PairsSize(pairs) > abi.MaxPairsBytes {
		return ErrMapTooLarge
	}
	buf := abi.AppendPairs(takeScratch(), pairs)
	st := hSetHeaderMapPairs(mt, buf)
	keepScratch(buf)
	return statusToError(st)
}

func getMapValue(mt uint32, key string) (string, error) {
	v, st := hGetHeaderMapValue(mt, key)
	if st != abi.StatusOK {
		return "", statusToError(st)
	}
	return owned(v), nil
}

// owned views a block the host just allocated for this call, and that
// nothing else references, as a string without copying it.
func owned(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
