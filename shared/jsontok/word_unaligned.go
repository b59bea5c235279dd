//go:build amd64 || arm64 || 386 || ppc64le || wasm

package jsontok

import "unsafe"

// word reads b[i:i+8] as a little-endian word; the caller ensures
// i+8 <= len(b). On these architectures an unaligned load is one
// instruction, and in wasm it avoids the bounds checks that made
// binary.LittleEndian a third slower in the scanning loops.
func word(b []byte, i int) uint64 {
	return *(*uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), i))
}
