// Package jsontok is tokentriage's one JSON tokenizer: every reader of JSON
// in shared/ (request bodies, answers and SSE events in shared/llm, ledger
// rows, configuration documents) scans with it, and every writer of a JSON
// string escapes with it. See RATIONALE.md, "Why one JSON tokenizer?".
//
// The reading side has two levels over one grammar (RFC 8259):
//
//   - Tokenizer, a push-down reader that hands out one token at a time
//     (object and array brackets, member names, strings, numbers,
//     literals) with the byte span of each, for readers that follow a
//     whole document (the request body, an SSE event, a config);
//   - the scanning functions it is built from (SkipSpace, ScanString,
//     ScanNumber, ScanLiteral, Skip), for readers that pull a few known
//     members and skip the rest (a ledger row, an answer's usage).
//
// Rules set what the readers differ in: how deep a document may nest, and
// whether a string must be valid UTF-8 (the ledger's strict RFC 8259) or
// may hold any byte but a control character (what gjson and encoding/json
// accept). Everything else is the same grammar for every reader: space is
// space, tab, CR and LF; a string holds no control character and only
// valid escapes; a number is -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
//
// Nothing recurses: nesting is a bit stack in the Tokenizer, bounded by
// Rules.MaxDepth, so no input can grow the goroutine stack. Nothing
// allocates while reading. A fault is an
// Error with its byte offset, a code, and two wordings: the project's own
// (Cause) and encoding/json's (GoText), the latter held to encoding/json
// word for word by the package's fuzz target.
//
// The writing side appends strings escaped as encoding/json escapes them
// (AppendString without HTML escaping, AppendStringHTML with it), integers
// and floats as encoding/json writes them, and decodes a string token as
// encoding/json or gjson decodes it (AppendText).
//
// Strings are crossed eight and sixteen bytes at a time: in the filter's
// wasm a loop over single bytes costs about 15 ns a byte, a loop that tests
// a word at a time under 2.
package jsontok
