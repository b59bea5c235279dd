package wire

import "time"

// appendSecondTime appends t as a JSON string in UTC, RFC 3339 to the
// second ("2026-09-01T00:00:00Z"): period boundaries are whole seconds.
func appendSecondTime(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	dst = t.UTC().AppendFormat(dst, time.RFC3339)
	return append(dst, '"')
}
