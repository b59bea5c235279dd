package wire

import (
	"crypto/rand"
	"testing"
)

func TestParseRequestIDInvertsNewRequestID(t *testing.T) {
	for i := 0; i < 1000; i++ {
		var b [16]byte
		rand.Read(b[:])
		if i == 0 {
			b = [16]byte{}
		}
		if i == 1 {
			for j := range b {
				b[j] = 0xff
			}
		}
		id := NewRequestID(b)
		got, ok := ParseRequestID(id)
		if !ok || got != b {
			t.Fatalf("ParseRequestID(%q) = %x, %v; want %x", id, got, ok, b)
		}
	}
	for _, bad := range []string{"", "tt_", "tt_aaaaaaaaaaaaaaaaaaaaaaaaab", "xx_aaaaaaaaaaaaaaaaaaaaaaaaaa", "tt_AAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		if _, ok := ParseRequestID(bad); ok {
			t.Errorf("ParseRequestID(%q) accepted it", bad)
		}
	}
}
