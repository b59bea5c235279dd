package proxywasm

import (
	"errors"
	"strconv"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"
)

// Errors for host statuses that the SDK's types package has no value for.
// The others map to types.ErrorStatusNotFound, types.ErrorStatusBadArgument,
// types.ErrorStatusEmpty, types.ErrorStatusCasMismatch,
// types.ErrorInternalFailure and types.ErrorUnimplemented, so filter code
// compares errors exactly as it would with the SDK.
var (
	ErrorStatusSerializationFailure = errors.New("error status returned by host: serialization failure")
	ErrorStatusParseFailure         = errors.New("error status returned by host: parse failure")
	ErrorStatusInvalidMemoryAccess  = errors.New("error status returned by host: invalid memory access")
	ErrorStatusBrokenConnection     = errors.New("error status returned by host: broken connection")

	// ErrMalformedPairs: the host returned a header map that is not in the
	// pair format.
	ErrMalformedPairs = abi.ErrMalformedPairs

	// ErrNoHost: a native call made outside a callback, where no emulated
	// host is running. Call the API only from the filter's callbacks.
	ErrNoHost = errors.New("proxywasm: no host is running: the call was made outside a callback (call the API only from a context's callbacks, on their goroutine)")

	errEmptyPath = errors.New("proxywasm: property path is empty: give at least one segment, like []string{\"request\", \"id\"}")
)

// statusNoHost is what the native stand-in's host calls return outside a
// callback; no real host uses it.
const statusNoHost = 0xffff

func statusToError(st uint32) error {
	switch st {
	case abi.StatusOK:
		return nil
	case abi.StatusNotFound:
		return types.ErrorStatusNotFound
	case abi.StatusBadArgument:
		return types.ErrorStatusBadArgument
	case abi.StatusSerializationFailed:
		return ErrorStatusSerializationFailure
	case abi.StatusParseFailure:
		return ErrorStatusParseFailure
	case abi.StatusInvalidMemoryAccess:
		return ErrorStatusInvalidMemoryAccess
	case abi.StatusEmpty:
		return types.ErrorStatusEmpty
	case abi.StatusCasMismatch:
		return types.ErrorStatusCasMismatch
	case abi.StatusInternalFailure:
		return types.ErrorInternalFailure
	case abi.StatusBrokenConnection:
		return ErrorStatusBrokenConnection
	case abi.StatusUnimplemented:
		return types.ErrorUnimplemented
	case statusNoHost:
		return ErrNoHost
	}
	return errors.New("error status returned by host: unknown status " + strconv.FormatUint(uint64(st), 10))
}
