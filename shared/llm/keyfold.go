package llm

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tokentriage/tokentriage/shared/jsontok/jv"
)

// A member name that differs from a governed one only in case, or in a
// character Unicode folds to one of its letters ("MAX_TOKENS",
// "max_to\u212Aens" with the Kelvin sign, "\u017Ftream" with the long s),
// is not the governed member to the gateway, but it is to a provider that
// matches names without regard to case: Go's encoding/json (Ollama, and
// many self-hosted servers), Jackson with case-insensitive properties. The
// gateway would govern one value and the provider serve another, so such a
// body is refused, naming the member. See
// RATIONALE.md#why-are-keys-that-fold-to-a-governed-key-refused.

// The governed names of each container the parsers read.
var (
	rootNames       = []string{"model", "stream", "stream_options", "max_tokens", "max_completion_tokens", "max_output_tokens", "messages", "prompt", "input", "instructions", "system", "n", "best_of", "previous_response_id", "conversation", "tools"}
	streamOptsNames = []string{"include_usage"}
	messageNames    = []string{"content", "tool_calls"}
	partNames       = []string{"text", "content", "input"}
	callNames       = []string{"function"}
	functionNames   = []string{"arguments"}
	itemNames       = []string{"content", "output", "arguments"}
	toolNames       = []string{"type"}
)

// mayFold reports whether key could fold to a governed name without being
// one: every governed name is lower-case ASCII, so a key of lower-case
// ASCII alone either is one or is none.
func mayFold(key []byte) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf || c >= 'A' && c <= 'Z' {
			return true
		}
	}
	return false
}

// foldsTo returns the governed name among names (those of endpoint ep when
// root) that key folds to without equalling it, or "".
func foldsTo(names []string, ep Endpoint, root bool, key string) string {
	for _, name := range names {
		if key == name || root && !governedAt(ep, name) {
			continue
		}
		if strings.EqualFold(key, name) || jsonFold(key) == jsonFold(name) {
			return name
		}
	}
	return ""
}

// governedAt reports whether the top-level member name is read for ep.
func governedAt(ep Endpoint, name string) bool {
	r, _ := rootRole(ep, []byte(name))
	return r != vNone
}

// namesOf is the governed names of the container scanRequest calls q.
func namesOf(q uint8) []string {
	switch q {
	case qRoot:
		return rootNames
	case qStreamOpts:
		return streamOptsNames
	case qMessage:
		return messageNames
	case qPart0, qPart1:
		return partNames
	case qCall:
		return callNames
	case qFunction:
		return functionNames
	case qItem:
		return itemNames
	case qTool:
		return toolNames
	}
	return nil
}

// jsonFold is the folding Go's encoding/json matches member names by:
// each rune upper-cased after lower-casing.
func jsonFold(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(unicode.ToUpper(unicode.ToLower(r)))
	}
	return b.String()
}

// foldedKey checks the member names of object v (at path at) against
// names: the first that folds to one without equalling it is an error.
func foldedKey(v jv.Value, at path, ep Endpoint, root bool, names []string) *RequestError {
	var err *RequestError
	v.ForEach(func(k, _ jv.Value) bool {
		if !mayFold([]byte(k.Str)) {
			return true
		}
		if name := foldsTo(names, ep, root, k.Str); name != "" {
			err = foldError(at.key(k.Str), k, name)
			return false
		}
		return true
	})
	return err
}

func foldError(at path, k jv.Value, name string) *RequestError {
	return fieldError(at, k, "the key "+strconv.QuoteToASCII(k.Str)+" differs from "+strconv.Quote(name)+
		" only in case or Unicode folding, and a provider that matches keys without regard to case (Go's encoding/json does) reads it as "+
		strconv.Quote(name)+"; send the key spelt exactly "+strconv.Quote(name)+", once")
}
