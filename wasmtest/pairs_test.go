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
	got, ok := parsePairs(b)
	if !ok || len(got) != len(m) {
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

// Malformed input is refused, never read as an empty or a partial map;
// the two spellings of an empty map are empty maps.
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
		"zero and more": {0, 0, 0, 0, 0},
		"over 1024 pairs": func() []byte {
			m := make(hmap, maxPairsCount+1)
			for i := range m {
				m[i] = hpair{"k", "v"}
			}
			b := make([]byte, m.pairsSize())
			m.marshalTo(b)
			return b
		}(),
	} {
		if got, ok := parsePairs(b); ok || got != nil {
			t.Errorf("%s: parsed %v, %v", name, got, ok)
		}
	}
	if got, ok := parsePairs(good()); !ok || len(got) != 1 {
		t.Errorf("good input parsed as %v, %v", got, ok)
	}
	for _, empty := range [][]byte{nil, {0, 0, 0, 0}} {
		if got, ok := parsePairs(empty); !ok || len(got) != 0 {
			t.Errorf("%x: parsed %v, %v; want an empty map", empty, got, ok)
		}
	}
}

func TestParsePairsLowerCasesNames(t *testing.T) {
	m := hmap{{"X-Mixed", "V"}}
	b := make([]byte, m.pairsSize())
	m.marshalTo(b)
	if got, _ := parsePairs(b); got[0] != (hpair{"x-mixed", "V"}) {
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
		got, ok := parsePairs(in)
		if !ok || len(got) == 0 {
			return
		}
		out := make([]byte, got.pairsSize())
		got.marshalTo(out)
		if !bytes.Equal(bytes.ToLower(in), bytes.ToLower(out)) {
			t.Errorf("round trip changed %x into %x", in, out)
		}
	})
}
