package abi

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

func TestAppendPairsLayout(t *testing.T) {
	got := AppendPairs(nil, [][2]string{{"a", "bc"}, {"", ""}})
	want := []byte{
		2, 0, 0, 0, // count
		1, 0, 0, 0, 2, 0, 0, 0, // "a" / "bc"
		0, 0, 0, 0, 0, 0, 0, 0, // "" / ""
		'a', 0, 'b', 'c', 0,
		0, 0,
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("AppendPairs = %v, want %v", got, want)
	}
	if n := PairsSize([][2]string{{"a", "bc"}, {"", ""}}); n != len(want) {
		t.Fatalf("PairsSize = %d, want %d", n, len(want))
	}
	if got := AppendPairs(nil, nil); !bytes.Equal(got, []byte{0, 0, 0, 0}) {
		t.Fatalf("empty map = %v, want 4 zero bytes", got)
	}
	prefix := []byte("xyz")
	if got := AppendPairs(prefix, [][2]string{{"k", "v"}}); !bytes.HasPrefix(got, prefix) {
		t.Fatalf("AppendPairs lost the prefix: %v", got)
	}
}

func TestDecodePairsRoundTrip(t *testing.T) {
	tests := [][][2]string{
		{{":method", "GET"}, {":path", "/v1/chat/completions"}, {"authorization", "Bearer tt-vk_x"}},
		{{"", ""}},
		{{"k", ""}, {"", "v"}, {"dup", "1"}, {"dup", "2"}},
		{{"binary", "a\x01\xffb"}},
	}
	for i, pairs := range tests {
		enc := AppendPairs(nil, pairs)
		got, err := DecodePairs(enc)
		if err != nil {
			t.Fatalf("case %d: DecodePairs: %v", i, err)
		}
		if !slices.Equal(got, pairs) {
			t.Fatalf("case %d: DecodePairs = %q, want %q", i, got, pairs)
		}
	}
	for _, empty := range [][]byte{nil, {0, 0, 0, 0}} {
		got, err := DecodePairs(empty)
		if err != nil || len(got) != 0 {
			t.Fatalf("DecodePairs(%v) = %q, %v; want an empty map", empty, got, err)
		}
	}
}

func TestDecodePairsMalformed(t *testing.T) {
	good := AppendPairs(nil, [][2]string{{"ab", "cd"}})
	missingKeyNUL := slices.Clone(good)
	missingKeyNUL[12+2] = 'x'
	missingValueNUL := slices.Clone(good)
	missingValueNUL[len(good)-1] = 'x'
	hugeCount := slices.Clone(good)
	hugeCount[3] = 0xff
	hugeKey := slices.Clone(good)
	hugeKey[7] = 0xff
	tests := map[string][]byte{
		"short header":      {1, 0, 0},
		"count too large":   hugeCount,
		"key length":        hugeKey,
		"missing key NUL":   missingKeyNUL,
		"missing value NUL": missingValueNUL,
		"trailing bytes":    append(slices.Clone(good), 0),
		"truncated":         good[:len(good)-1],
		"zero count, extra": {0, 0, 0, 0, 0},
	}
	for name, in := range tests {
		if _, err := DecodePairs(in); !errors.Is(err, ErrMalformedPairs) {
			t.Errorf("%s: DecodePairs err = %v, want ErrMalformedPairs", name, err)
		}
	}
}

func TestAppendPath(t *testing.T) {
	if got := string(AppendPath(nil, []string{"request", "id"})); got != "request\x00id" {
		t.Fatalf("AppendPath = %q", got)
	}
	if got := string(AppendPath(nil, []string{"plugin_name"})); got != "plugin_name" {
		t.Fatalf("AppendPath = %q", got)
	}
}

// FuzzDecodePairs feeds arbitrary host data: decoding never panics, and
// whatever decodes re-encodes to the same bytes.
func FuzzDecodePairs(f *testing.F) {
	f.Add(AppendPairs(nil, [][2]string{{":status", "200"}, {"content-type", "application/json"}}))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 'a', 0, 'b', 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		pairs, err := DecodePairs(data)
		if err != nil {
			return
		}
		if len(pairs) == 0 {
			if len(data) != 0 && !bytes.Equal(data, []byte{0, 0, 0, 0}) {
				t.Fatalf("%v decoded to an empty map", data)
			}
			return
		}
		if enc := AppendPairs(nil, pairs); !bytes.Equal(enc, data) {
			t.Fatalf("re-encoding %q gave %v, want %v", pairs, enc, data)
		}
	})
}

// FuzzPairsRoundTrip encodes arbitrary strings and decodes them back.
func FuzzPairsRoundTrip(f *testing.F) {
	f.Add("k", "v", "", "x\x00y")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		pairs := [][2]string{{k1, v1}, {k2, v2}}
		got, err := DecodePairs(AppendPairs(nil, pairs))
		// A NUL inside a key or value is encoded faithfully (lengths
		// carry it), so the round trip holds for any bytes.
		if err != nil || !slices.Equal(got, pairs) {
			t.Fatalf("round trip of %q = %q, %v", pairs, got, err)
		}
	})
}

var benchHeaders = [][2]string{
	{":method", "POST"}, {":path", "/v1/chat/completions"}, {":authority", "api.example"},
	{":scheme", "https"}, {"content-type", "application/json"}, {"authorization", "Bearer tt-vk_0123456789ab-0123456789abcdef0123456789abcdef"},
	{"user-agent", "openai-python/1.40.0"}, {"x-request-id", "3f1c1f2e-6a8a-4f3e-9b2f-0c4b5d6e7f80"},
}

func BenchmarkAppendPairs(b *testing.B) {
	buf := AppendPairs(nil, benchHeaders)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendPairs(buf[:0], benchHeaders)
	}
}

func BenchmarkDecodePairsString(b *testing.B) {
	s := string(AppendPairs(nil, benchHeaders))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodePairsString(s); err != nil {
			b.Fatal(err)
		}
	}
}
