package proxytest

import (
	"strings"

	"github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"
)

// Header maps are kept as pairs in arrival order with lower-cased keys,
// as Envoy keeps them.

func lowerPairs(in [][2]string) [][2]string {
	if in == nil {
		return nil
	}
	out := make([][2]string, len(in))
	for i, p := range in {
		out[i] = [2]string{strings.ToLower(p[0]), p[1]}
	}
	return out
}

func clonePairs(in [][2]string) [][2]string {
	if in == nil {
		return nil
	}
	return append([][2]string(nil), in...)
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// decodeHostPairs is cpp-host's PairsUtil::toPairs: malformed input is an
// empty map, silently.
func decodeHostPairs(data []byte) [][2]string {
	p, err := abi.DecodePairs(data)
	if err != nil {
		return nil
	}
	return lowerPairs(p)
}

func firstValue(m [][2]string, key string) (string, bool) {
	for _, p := range m {
		if p[0] == key {
			return p[1], true
		}
	}
	return "", false
}

func removeKey(m [][2]string, key string) [][2]string {
	out := m[:0]
	for _, p := range m {
		if p[0] != key {
			out = append(out, p)
		}
	}
	return out
}

// replaceKey is Envoy's setCopy: the first entry takes the value, the
// others go; a missing key is appended.
func replaceKey(m [][2]string, key, value string) [][2]string {
	for i, p := range m {
		if p[0] == key {
			m[i][1] = value
			rest := removeKey(append([][2]string(nil), m[i+1:]...), key)
			return append(m[:i+1], rest...)
		}
	}
	return append(m, [2]string{key, value})
}

// byteSize is Envoy's HeaderMap::byteSize: the sum of key and value lengths.
func byteSize(m [][2]string) uint32 {
	n := 0
	for _, p := range m {
		n += len(p[0]) + len(p[1])
	}
	return uint32(n)
}
