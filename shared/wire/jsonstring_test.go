package wire

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"strconv"
	"strings"
	"testing"
)

// TestAppendJSONStringMatchesEncodingJSON holds the appender, its
// eight-byte fast prefix included, to encoding/json with HTML escaping off
// on strings of every kind of byte, at every alignment.
func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	pieces := []string{"a", "org:acme/team:ml", "\"", "\\", "\n", "\x00", "\x1f", "\x7f", "é", "\u2028", "\u2029", "\xff", "\xe2\x80", "<>&", "😀", strings.Repeat("x", 9)}
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for k := rng.Intn(10); k > 0; k-- {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		s := b.String()
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got := AppendJSONString(nil, s); string(got)+"\n" != want.String() {
			t.Fatalf("%q: %s, want %s", s, got, want.String())
		}
	}
}

// TestAppendInt holds AppendInt to strconv.AppendInt.
func TestAppendInt(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 20000; i++ {
		v := rng.Int63() >> rng.Intn(63)
		if i%3 == 0 {
			v = -v
		}
		for _, x := range []int64{v, 0, 9, 10, 1<<63 - 1, -1 << 63} {
			if got, want := string(AppendInt([]byte("x"), x)), "x"+strconv.FormatInt(x, 10); got != want {
				t.Fatalf("AppendInt(%d) = %s, want %s", x, got, want)
			}
		}
	}
}
