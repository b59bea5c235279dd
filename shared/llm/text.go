package llm

import (
	"unsafe"

	"github.com/tokentriage/tokentriage/shared/jsontok/jv"

	"github.com/tokentriage/tokentriage/shared/jsontok"
)

// view returns b as a string without copying. The string aliases b: it must
// not outlive b or be kept after b changes (values kept past a call are
// cloned).
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// viewBytes returns s as a byte slice without copying, for reading only.
func viewBytes(s string) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// textLen is the number of bytes r's text has once its escapes are decoded,
// computed without decoding: a string's decoded length (what gjson's Str
// holds), 0 for anything that is not a string.
func textLen(r jv.Value) int64 {
	if r.Type != jv.String {
		return 0
	}
	return decodedLen(r.Raw)
}

// decodedLen is the decoded byte length of a JSON string token raw,
// quotes included, matching gjson's unescaping (a surrogate that is not
// half of a valid pair becomes U+FFFD, 3 bytes): jsontok.DecodedLen.
func decodedLen(raw string) int64 { return int64(jsontok.DecodedLen(viewBytes(raw))) }
