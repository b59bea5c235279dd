package llm

import "github.com/tokentriage/tokentriage/shared/jsontok"

// MaxDepth is the deepest nesting of arrays and objects a request body may
// have. Real requests stay far below it (tool schemas nest a few dozen
// levels at most); the bound keeps validation iterative and its memory
// fixed, where gjson.ValidBytes recurses once per level with no limit.
const MaxDepth = jsontok.DefaultMaxDepth

// checkSyntax validates b as one JSON value with the rules of
// gjson.ValidBytes (whitespace is space, tab, CR and LF; strings must not
// hold control characters; escapes are checked; UTF-8 is not), iteratively
// and with nesting bounded by MaxDepth: the project's tokenizer under
// jsontok.GJSON. It returns -1 and "" when b is valid, else the byte offset
// of the first problem and what it is. See
// RATIONALE.md#why-does-shared-llm-validate-json-itself.
func checkSyntax(b []byte) (int, string) {
	if e := jsontok.Valid(b, jsontok.GJSON); e.Code != jsontok.ErrNone {
		return e.At(), e.Cause()
	}
	return -1, ""
}
