package abi

import "errors"

// ErrMalformedPairs reports bytes that are not a header map in the pair
// format: a short header, a count the data cannot hold, a missing NUL,
// or trailing bytes.
var ErrMalformedPairs = errors.New("proxywasm: malformed header map: the host sent bytes that are not in the proxy-wasm pair format")

// PairsSize is the encoded size of pairs: 4 + Σ(8 + len(key) + 1 + len(value) + 1).
func PairsSize(pairs [][2]string) int {
	n := 4
	for i := range pairs {
		n += 10 + len(pairs[i][0]) + len(pairs[i][1])
	}
	return n
}

// AppendPairs appends pairs to dst in the proxy-wasm pair format:
// u32 count, count × (u32 key length, u32 value length), then each key and
// value followed by a NUL. Integers are little-endian. It grows dst at most
// once.
func AppendPairs(dst []byte, pairs [][2]string) []byte {
	size := PairsSize(pairs)
	if cap(dst)-len(dst) < size {
		grown := make([]byte, len(dst), len(dst)+size)
		copy(grown, dst)
		dst = grown
	}
	dst = appendU32(dst, uint32(len(pairs)))
	for i := range pairs {
		dst = appendU32(dst, uint32(len(pairs[i][0])))
		dst = appendU32(dst, uint32(len(pairs[i][1])))
	}
	for i := range pairs {
		dst = append(dst, pairs[i][0]...)
		dst = append(dst, 0)
		dst = append(dst, pairs[i][1]...)
		dst = append(dst, 0)
	}
	return dst
}

// DecodePairs decodes the pair format. The strings share one copy of data,
// so data may be reused afterwards. Empty input is an empty map.
func DecodePairs(data []byte) ([][2]string, error) {
	return DecodePairsString(string(data))
}

// DecodePairsString decodes the pair format held in s without copying:
// every key and value is a substring of s. It never panics; malformed input
// returns ErrMalformedPairs. Empty input is an empty map.
func DecodePairsString(s string) ([][2]string, error) {
	if len(s) == 0 {
		return nil, nil
	}
	if len(s) < 4 {
		return nil, ErrMalformedPairs
	}
	n := uint64(u32(s, 0))
	// Each pair needs 8 bytes of lengths and 2 NULs.
	if n > uint64(len(s)-4)/10 {
		return nil, ErrMalformedPairs
	}
	if n == 0 {
		if len(s) != 4 {
			return nil, ErrMalformedPairs
		}
		return nil, nil
	}
	out := make([][2]string, n)
	off := uint64(4 + 8*n)
	size := uint64(len(s))
	for i := uint64(0); i < n; i++ {
		klen := uint64(u32(s, int(4+8*i)))
		vlen := uint64(u32(s, int(8+8*i)))
		if klen+vlen+2 > size-off {
			return nil, ErrMalformedPairs
		}
		kend := off + klen
		if s[kend] != 0 {
			return nil, ErrMalformedPairs
		}
		vend := kend + 1 + vlen
		if s[vend] != 0 {
			return nil, ErrMalformedPairs
		}
		out[i] = [2]string{s[off:kend], s[kend+1 : vend]}
		off = vend + 1
	}
	if off != size {
		return nil, ErrMalformedPairs
	}
	return out, nil
}

// AppendPath appends a property path: its segments joined by NUL.
func AppendPath(dst []byte, path []string) []byte {
	for i, seg := range path {
		if i > 0 {
			dst = append(dst, 0)
		}
		dst = append(dst, seg...)
	}
	return dst
}

func appendU32(dst []byte, v uint32) []byte {
	return append(dst, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

func u32(s string, i int) uint32 {
	return uint32(s[i]) | uint32(s[i+1])<<8 | uint32(s[i+2])<<16 | uint32(s[i+3])<<24
}
