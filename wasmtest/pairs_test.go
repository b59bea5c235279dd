package wasmtest

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestPairsRoundTrip(t *testing.T) {
	m := hmap{{":status", "200"}, {"x-a", ""}, {"x-b", "two words"}}
	b := make([]byte, m.pairsSize())
	m.marshalTo(b)
	got := parsePairs(b)
	if len(got) != len(m) {
		t.Fatalf("parsed %v", got)
	}
	for i := range m {
		if got[i] != m[i] {
			t.Errorf("pair %d = %v, want %v", i, got[i], m[i])
		}
	}
	if (hmap{}).pairsSize() != 0 {
		t.Error("an empty map should serialise to nothing (0,0)")
	}
}

// Like cpp-host, malformed input is an empty map, never a partial one.
func TestParsePairsRejectsMalformed(t *testing.T) {
	good := func() []byte {
		m := hmap{{"k", "v"}}
		b := make([]byte, m.pairsSize())
		m.marshalTo(b)
		return b
	}
	for name, b := range map[string][]byte{
		"short":         {1, 0},
		"count too big": func() []byte { b := good(); binary.LittleEndian.PutUint32(b, 9); return b }(),
		"missing NUL":   func() []byte { b := good(); b[len(b)-1] = 'x'; return b }(),
		"trailing byte": append(good(), 0),
		"size mismatch": func() []byte { b := good(); binary.LittleEndian.PutUint32(b[4:], 5); return b }(),
	} {
		if got := parsePairs(b); got != nil {
			t.Errorf("%s: parsed %v", name, got)
		}
	}
	if got := parsePairs(good()); len(got) != 1 {
		t.Errorf("good input parsed as %v", got)
	}
}

func TestParsePairsLowerCasesNames(t *testing.T) {
	m := hmap{{"X-Mixed", "V"}}
	b := make([]byte, m.pairsSize())
	m.marshalTo(b)
	if got := parsePairs(b); got[0] != (hpair{"x-mixed", "V"}) {
		t.Errorf("parsed %v", got)
	}
}

func TestHmapReplaceAndRemove(t *testing.T) {
	m := hmap{{"a", "1"}, {"b", "2"}, {"a", "3"}}
	m.replace("a", "x")
	if len(m) != 2 || m[0] != (hpair{"a", "x"}) || m[1] != (hpair{"b", "2"}) {
		t.Errorf("after replace: %v", m)
	}
	m.replace("c", "y")
	m.remove("b")
	if len(m) != 2 || m[1] != (hpair{"c", "y"}) {
		t.Errorf("after replace and remove: %v", m)
	}
	if v, ok := m.getFold([]byte("C")); !ok || v != "y" {
		t.Errorf("getFold(C) = %q, %v", v, ok)
	}
}

// Whatever the guest hands over, parsing never panics, and what it accepts
// serialises back to the same bytes (names already lower-case).
func FuzzParsePairs(f *testing.F) {
	m := hmap{{"k", "v"}, {"x", ""}}
	b := make([]byte, m.pairsSize())
	m.marshalTo(b)
	f.Add(b)
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		got := parsePairs(in)
		if got == nil {
			return
		}
		out := make([]byte, got.pairsSize())
		got.marshalTo(out)
		if !bytes.Equal(bytes.ToLower(in), bytes.ToLower(out)) {
			t.Errorf("round trip changed %x into %x", in, out)
		}
	})
}
