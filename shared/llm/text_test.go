package llm

import (
	"testing"

	"github.com/tidwall/gjson"
)

// TestDecodedLenMatchesGJSON checks decodedLen against the length of
// gjson's unescaped string.
func TestDecodedLenMatchesGJSON(t *testing.T) {
	for _, raw := range []string{
		`""`, `"abc"`, `"a\nb"`, `"\u00e9"`, `"\u20ac"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ud83dx"`,
		`"\ud83d\u0041"`, `"\ude00"`, `"\\\/\"\b\f\r\t"`, `"é😀"`, `"\u0000"`, `"x\ud83d\ude00y\u00e9"`,
	} {
		want := len(gjson.Parse(raw).Str)
		if got := decodedLen(raw); got != int64(want) {
			t.Errorf("decodedLen(%s) = %d, gjson decodes %d bytes", raw, got, want)
		}
	}
}
