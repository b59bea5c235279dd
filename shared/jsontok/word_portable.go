//go:build !(amd64 || arm64 || 386 || ppc64le || wasm)

package jsontok

import "encoding/binary"

// word reads b[i:i+8] as a little-endian word; the caller ensures
// i+8 <= len(b).
func word(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }
