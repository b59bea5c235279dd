package llm

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
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
func textLen(r gjson.Result) int64 {
	if r.Type != gjson.String {
		return 0
	}
	return decodedLen(r.Raw)
}

// decodedLen is the decoded byte length of a JSON string token raw,
// quotes included, matching gjson's unescaping (a surrogate that is not
// half of a valid pair becomes U+FFFD, 3 bytes).
func decodedLen(raw string) int64 {
	if len(raw) < 2 || raw[0] != '"' {
		return 0
	}
	s := raw[1 : len(raw)-1]
	esc := strings.IndexByte(s, '\\')
	if esc < 0 {
		return int64(len(s))
	}
	n := int64(esc)
	for i := esc; i < len(s); i++ {
		if s[i] != '\\' {
			n++
			continue
		}
		i++
		if i >= len(s) {
			break
		}
		if s[i] != 'u' {
			n++
			continue
		}
		if i+5 > len(s) {
			break
		}
		r := hex4(s[i+1:])
		i += 4
		if r >= 0xD800 && r < 0xDC00 && i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
			if r2 := hex4(s[i+3:]); r2 >= 0xDC00 && r2 < 0xE000 {
				r = utf16.DecodeRune(r, r2)
				i += 6
			}
		}
		if l := utf8.RuneLen(r); l > 0 {
			n += int64(l)
		} else {
			n += 3
		}
	}
	return n
}

// hex4 decodes four hexadecimal digits (validated by the caller's syntax
// check; anything else decodes as 0).
func hex4(s string) rune {
	var r rune
	for k := 0; k < 4 && k < len(s); k++ {
		c := s[k]
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0
		}
	}
	return r
}
