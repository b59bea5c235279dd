package wire

// A request id is "tt_" followed by 26 lowercase base32 characters (RFC 4648
// alphabet, lowercased, no padding): the 128 random bits of one request.
// It names the request in the X-Tt-Request-Id header and on its ledger row.

const (
	requestIDPrefix = "tt_"
	requestIDChars  = 26
	// RequestIDLen is the length of every request id.
	RequestIDLen = len(requestIDPrefix) + requestIDChars
	base32Lower  = "abcdefghijklmnopqrstuvwxyz234567"
)

// NewRequestID renders 16 random bytes as a request id.
func NewRequestID(random [16]byte) string {
	var out [RequestIDLen]byte
	copy(out[:], requestIDPrefix)
	var acc uint64 // bit accumulator
	bits := 0
	j := len(requestIDPrefix)
	for _, b := range random {
		acc = acc<<8 | uint64(b)
		bits += 8
		for bits >= 5 {
			bits -= 5
			out[j] = base32Lower[(acc>>bits)&31]
			j++
		}
	}
	out[j] = base32Lower[(acc<<(5-bits))&31] // the last 3 bits, zero-padded
	return string(out[:])
}

// ValidRequestID reports whether s has the shape NewRequestID produces,
// including zero padding bits in the last character.
func ValidRequestID(s string) bool {
	if len(s) != RequestIDLen || s[:len(requestIDPrefix)] != requestIDPrefix {
		return false
	}
	for i := len(requestIDPrefix); i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	last := s[len(s)-1]
	v := byte(0)
	if last >= 'a' {
		v = last - 'a'
	} else {
		v = last - '2' + 26
	}
	return v&3 == 0
}

// ParseRequestID returns the 16 random bytes of a request id, the inverse
// of NewRequestID, and false when s is not a request id.
func ParseRequestID(s string) ([16]byte, bool) {
	var out [16]byte
	if !ValidRequestID(s) {
		return out, false
	}
	var acc uint64
	bits, j := 0, 0
	for i := len(requestIDPrefix); i < len(s) && j < len(out); i++ {
		c := s[i]
		v := c - 'a'
		if c < 'a' {
			v = c - '2' + 26
		}
		acc = acc<<5 | uint64(v)
		bits += 5
		if bits >= 8 {
			bits -= 8
			out[j] = byte(acc >> bits)
			j++
		}
	}
	return out, true
}
