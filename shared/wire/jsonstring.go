package wire

import "github.com/tokentriage/tokentriage/shared/jsontok"

// Every string in this package's bodies is written by jsontok.AppendString:
// escaped as encoding/json escapes it with HTML escaping off (see
// RATIONALE.md, "Why one JSON tokenizer?").

// appendStrings appends ss as a compact JSON array of strings; nil is null.
func appendStrings(dst []byte, ss []string) []byte {
	if ss == nil {
		return append(dst, "null"...)
	}
	return jsontok.AppendStrings(dst, ss)
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}
