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

// statusErrors maps each status a host call can fail with to its error.
var statusErrors = [...]error{
	abi.StatusNotFound:            types.ErrorStatusNotFound,
	abi.StatusBadArgument:         types.ErrorStatusBadArgument,
	abi.StatusSerializationFailed: ErrorStatusSerializationFailure,
	abi.StatusParseFailure:        ErrorStatusParseFailure,
	abi.StatusInvalidMemoryAccess: ErrorStatusInvalidMemoryAccess,
	abi.StatusEmpty:               types.ErrorStatusEmpty,
	abi.StatusCasMismatch:         types.ErrorStatusCasMismatch,
	abi.StatusInternalFailure:     types.ErrorInternalFailure,
	abi.StatusBrokenConnection:    ErrorStatusBrokenConnection,
	abi.StatusUnimplemented:       types.ErrorUnimplemented,
}

func statusToError(st uint32) error {
	switch {
	case st == abi.StatusOK:
		return nil
	case st == statusNoHost:
		return ErrNoHost
	case st < uint32(len(statusErrors)) && statusErrors[st] != nil:
		return statusErrors[st]
	}
	return errors.New("error status returned by host: unknown status " + strconv.FormatUint(uint64(st), 10))
}
