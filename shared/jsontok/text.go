package jsontok

import (
	"unicode/utf16"
	"unicode/utf8"
)

// AppendText appends to dst the decoded text of raw, a string token as
// ScanString accepted it (its quotes included): escapes resolved, a
// surrogate pair joined, a \u escape of an unpaired surrogate as U+FFFD.
// With replaceInvalid each byte of invalid UTF-8 also becomes U+FFFD, as
// encoding/json decodes it; without, it is kept as it is, as gjson
// decodes it. The common case, no escape, is one copy.
func AppendText(dst, raw []byte, replaceInvalid bool) []byte {
	s := raw[1 : len(raw)-1]
	i := 0
	for i < len(s) {
		c := s[i]
		if c == '\\' || c >= utf8.RuneSelf && replaceInvalid {
			break
		}
		i++
	}
	dst = append(dst, s[:i]...)
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\\':
			switch e := s[i+1]; e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r, _ := hex4(s, i+2)
				i += 6
				if utf16.IsSurrogate(r) {
					if r2, at := hex4(s, i+2); at < 0 && i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
						if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
							dst = utf8.AppendRune(dst, pair)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, e)
			}
			i += 2
		case c < utf8.RuneSelf || !replaceInvalid:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			dst = utf8.AppendRune(dst, r)
			i += size
		}
	}
	return dst
}

// Text is AppendText as a new string.
func Text(raw []byte, replaceInvalid bool) string {
	s := raw[1 : len(raw)-1]
	plain := true
	for _, c := range s {
		if c == '\\' || c >= utf8.RuneSelf && replaceInvalid {
			plain = false
			break
		}
	}
	if plain {
		return string(s)
	}
	return string(AppendText(make([]byte, 0, len(s)), raw, replaceInvalid))
}

// DecodedLen is the byte length of the decoded text of the string token
// raw (quotes included), escapes resolved as AppendText resolves them and
// every other byte counted as itself, without decoding it. A raw that
// starts with a quote but is not one valid token (as a lenient reader such
// as gjson may hand out) is counted escape by escape between its first and
// last bytes, as far as its escapes go.
func DecodedLen(raw []byte) int {
	if len(raw) < 2 || raw[0] != '"' {
		return 0
	}
	end, shrink, code := ScanString(raw, 0, false)
	if code != 0 || end != len(raw) {
		return decodedLenLoose(raw[1 : len(raw)-1])
	}
	return end - 2 - shrink
}

// decodedLenLoose is DecodedLen of a string body that ScanString did not
// accept whole.
func decodedLenLoose(s []byte) int {
	n := 0
	for i := 0; i < len(s); i++ {
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
		r, _ := hex4(s, i+1)
		i += 4
		if r >= 0xD800 && r < 0xDC00 && i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
			if r2, at := hex4(s, i+3); at < 0 && r2 >= 0xDC00 && r2 < 0xE000 {
				r = utf16.DecodeRune(r, r2)
				i += 6
			}
		}
		if l := utf8.RuneLen(r); l > 0 {
			n += l
		} else {
			n += 3
		}
	}
	return n
}
