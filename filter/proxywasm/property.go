package proxywasm

import "github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"

// GetProperty returns the host property at path, like
// []string{"request", "id"} or []string{"xds", "node", "id"}; Envoy encodes
// integers as 8 bytes little-endian and maps in the pair format.
// types.ErrorStatusNotFound when the host has no such property.
func GetProperty(path []string) ([]byte, error) {
	if len(path) == 0 {
		return nil, errEmptyPath
	}
	buf := abi.AppendPath(takeScratch(), path)
	v, st := hGetProperty(buf)
	keepScratch(buf)
	if st != abi.StatusOK {
		return nil, statusToError(st)
	}
	return v, nil
}

// GetPropertyMap returns a map-valued property, decoded from the pair
// format.
func GetPropertyMap(path []string) ([][2]string, error) {
	v, err := GetProperty(path)
	if err != nil {
		return nil, err
	}
	return abi.DecodePairsString(owned(v))
}

// SetProperty sets a property of the current stream (Envoy stores it as
// filter state "wasm.<path>").
func SetProperty(path []string, value []byte) error {
	if len(path) == 0 {
		return errEmptyPath
	}
	buf := abi.AppendPath(takeScratch(), path)
	st := hSetProperty(buf, value)
	keepScratch(buf)
	return statusToError(st)
}

// CallForeignFunction calls a function the host registered by name, such
// as Envoy's clear_route_cache, compress and uncompress, with args as its
// argument bytes. types.ErrorStatusNotFound when the host has no such
// function.
func CallForeignFunction(name string, args []byte) ([]byte, error) {
	v, st := hCallForeignFunction(name, args)
	if st != abi.StatusOK {
		return nil, statusToError(st)
	}
	return v, nil
}

// ClearRouteCache asks the host to choose the request's route again from
// its headers as they are now (Envoy's clear_route_cache foreign
// function). Envoy picks a route before the filter chain runs and keeps
// it: a filter that sets a header the routes match on calls this for the
// change to count. It reports whether the host has the function.
func ClearRouteCache() bool {
	_, st := hCallForeignFunction("clear_route_cache", nil)
	return st == abi.StatusOK
}
