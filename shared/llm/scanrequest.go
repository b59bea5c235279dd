package llm

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/tokentriage/tokentriage/shared/jsontok/jv"

	"github.com/tokentriage/tokentriage/shared/jsontok"
)

// This file is ParseRequest's fast path: one pass over the body that
// checks its syntax (checkSyntax's rules) and reads the governed fields
// (what parseRequestGJSON reads), strings scanned eight bytes at a time
// with their decoded length counted on the way. It also notes where the
// members SetOutputMax and InjectIncludeUsage rewrite are, so that the
// rewrites splice the body without reading it again. See
// RATIONALE.md#why-is-a-request-body-read-once.
//
// It reads only bodies whose reading it is sure of: valid JSON, governed
// values of their documented types, each governed key once and spelt
// without escapes. Anything else (a 400 to word, a key such as
// "mod\u0065l", a tool call with two function members) is read again by
// the jv path, which decides and words the error;
// TestScanRequestMatchesGJSON and FuzzScanRequest hold the two readings to
// the same results.

// Containers: what the members or elements of an open container are.
const (
	qNone       uint8 = iota // nothing inside matters
	qRoot                    // the body
	qStreamOpts              // stream_options
	qMessages                // messages: message objects
	qMessage                 // one message
	qParts0                  // content parts or blocks
	qPart0                   // one part
	qParts1                  // a tool_result's content blocks
	qPart1                   // one of those
	qToolCalls               // a message's tool_calls
	qCall                    // one tool call
	qFunction                // its function, arguments not yet read
	qPrompt                  // a prompt or input array: strings, tokens, token arrays
	qTokens                  // a token array
	qItems                   // responses input items
	qItem                    // one item
	qTools                   // responses tools (array, or object of tools)
	qTool                    // one tool, type not yet read
)

// Roles: what the next value is.
const (
	vNone          uint8 = iota
	vRoot                // the body
	vModel               // model
	vStream              // stream
	vStreamOpts          // stream_options
	vIncludeUsage        // stream_options.include_usage
	vMaxTokens           // max_tokens (chat, completions, messages)
	vMaxCompletion       // max_completion_tokens (chat)
	vMaxOutput           // max_output_tokens (responses)
	vMessages            // messages
	vMessage             // one message
	vContent             // string, parts or null: message content, system, item content and output
	vText                // string or null: part text, instructions, item arguments
	vToolCalls           // a message's tool_calls
	vCall                // one tool call
	vFunction            // a call's function
	vArguments           // a function's arguments
	vPart0               // one part of a content
	vPartContent0        // a part's content: parts one level down, string or null
	vPart1               // one part one level down
	vPartInput           // a tool_use's input: its JSON bytes count
	vPrompt              // a completions prompt or embeddings input
	vPromptElem          // one element of it
	vToken               // one token of a token array
	vRespInput           // a responses input
	vItem                // one input item
	vChoices             // n, best_of
	vRemote              // previous_response_id, conversation
	vRespPrompt          // responses prompt
	vTools               // responses tools
	vTool                // one tool
	vToolType            // a tool's type
)

// semanticDepth bounds the nesting where containers can matter; deeper
// containers are always qNone.
const semanticDepth = 16

// bodyEdits is where a parsed body's rewritable members are, so that
// SetOutputMax and InjectIncludeUsage splice without reading it again.
// Spans are value bytes; end 0 means absent (or null, for the maximums).
type bodyEdits struct {
	size          int // the body's length; 0 when the edits are unknown
	members       int // top-level members
	model         span
	maxTokens     span
	maxCompletion span
	maxOutput     span
	opts          span  // stream_options
	optsNull      bool  // stream_options is null
	optsMembers   int   // its members
	include       span  // stream_options.include_usage
	includeType   uint8 // jv.True, False or Null
}

// scanRequest reads body for endpoint ep into r (which holds Choices 1)
// and reports whether it could; see the top of this file. With fr, it
// also hands fr the top-level members fr wants (ParseRequestFields).
func scanRequest(ep Endpoint, b []byte, r *Request, fr *fieldReader) bool {
	var t jsontok.Tokenizer
	t.Reset(b, jsontok.GJSON)
	var (
		ctxs   [semanticDepth]uint8 // what each open container holds
		roles  [semanticDepth]uint8 // the role its value had
		opens  [semanticDepth]int   // where it opened
		counts [semanticDepth]int   // members or elements seen
		arrs   uint32               // bit d: the container at depth d is an array
	)
	ed := &r.edits
	*ed = bodyEdits{}
	var (
		seen          uint16
		maxTokens     int64 = -1
		maxCompletion int64 = -1
		callFound     bool  // the current tool call's arguments were read
		includeSeen   bool
		toolTyped     bool // the current tool's type was read
	)
	depth := 0
	cur := qNone
	role := vRoot
	var field []byte // the name of the top-level member being read, when fr wants it
	for {
		toks := t.Batch()
		for k := range toks {
			tok := &toks[k]
			switch tok.Kind {
			case jsontok.Key:
				if depth <= semanticDepth {
					counts[depth-1]++
				}
				if cur == qNone || cur == qTools {
					role = vNone
					if cur == qTools {
						role = vTool
					}
					continue
				}
				if tok.Shrink > 0 {
					return false // a key spelt with escapes: gjson decides what it is
				}
				key := b[tok.Start+1 : tok.End-1]
				if mayFold(key) && foldsTo(namesOf(cur), ep, cur == qRoot, string(key)) != "" {
					return false // a key a provider may read as a governed one: a 400
				}
				role = vNone
				switch cur {
				case qRoot:
					field = nil
					if fr != nil && fr.left > 0 && fr.wants(view(key)) {
						field = key
					}
					var bit uint16
					role, bit = rootRole(ep, key)
					if bit != 0 {
						if seen&bit != 0 {
							return false // a repeated governed key: a 400
						}
						seen |= bit
					}
				case qStreamOpts:
					if string(key) == "include_usage" {
						if includeSeen {
							return false
						}
						includeSeen = true
						role = vIncludeUsage
					}
				case qMessage:
					switch string(key) {
					case "content":
						role = vContent
					case "tool_calls":
						role = vToolCalls
					}
				case qPart0, qPart1:
					switch string(key) {
					case "text":
						role = vText
					case "content":
						if cur == qPart0 {
							role = vPartContent0
						}
					case "input":
						role = vPartInput
					}
				case qCall:
					if string(key) == "function" && !callFound {
						role = vFunction
					}
				case qFunction:
					if string(key) == "arguments" && !callFound {
						role = vArguments
					}
				case qItem:
					switch string(key) {
					case "content", "output":
						role = vContent
					case "arguments":
						role = vText
					}
				case qTool:
					if string(key) == "type" && !toolTyped {
						toolTyped = true
						role = vToolType
					}
				}
				continue
			case jsontok.ObjectEnd, jsontok.ArrayEnd:
				// Close the innermost container.
				depth--
				if depth == 1 && field != nil {
					fr.member(view(field), jv.ParseBytes(b[opens[1]:tok.End]))
					field = nil
				}
				if depth < semanticDepth {
					switch roles[depth] {
					case vStreamOpts:
						ed.opts.end = tok.End
						ed.optsMembers = counts[depth]
					case vPartInput:
						r.PromptBytes = addSat(r.PromptBytes, int64(tok.End-opens[depth]))
					case vToolType:
						if remoteTool(b[opens[depth]:tok.End]) {
							r.RemoteInput = true
						}
					case vRoot:
						ed.members = counts[depth]
					}
				}
				if depth == 0 {
					continue // End (or trailing bytes, an Err) follows
				}
				if depth <= semanticDepth {
					cur = ctxs[depth-1]
				} else {
					cur = qNone
				}
				continue
			case jsontok.End:
				if seen&seenModel == 0 {
					return false
				}
				switch {
				case maxCompletion >= 0:
					r.MaxTokens, r.HasMaxTokens = maxCompletion, true
				case maxTokens >= 0:
					r.MaxTokens, r.HasMaxTokens = maxTokens, true
				}
				ed.size = len(b)
				return true
			case jsontok.Err:
				return false
			}
			// A value: an element of an array takes its role from the
			// array's kind; deeper than semanticDepth every container is qNone
			// and nothing has a role.
			if depth > semanticDepth {
				role = vNone
			} else if depth > 0 && arrs&(1<<(depth-1)) != 0 {
				role = elemRole(cur)
				counts[depth-1]++
			}
			if obj := tok.Kind == jsontok.ObjectStart; obj || tok.Kind == jsontok.ArrayStart {
				child := qNone
				switch role {
				case vRoot:
					if !obj {
						return false
					}
					child = qRoot
				case vStreamOpts:
					if !obj {
						return false
					}
					child = qStreamOpts
					ed.opts.start = tok.Start
				case vMessages:
					if obj {
						return false
					}
					child = qMessages
				case vMessage:
					if !obj {
						return false
					}
					child = qMessage
				case vContent:
					if obj {
						return false
					}
					child = qParts0
				case vPart0:
					if !obj {
						return false
					}
					child = qPart0
				case vPartContent0:
					if obj {
						return false
					}
					child = qParts1
				case vPart1:
					if !obj {
						return false
					}
					child = qPart1
				case vToolCalls:
					if obj {
						return false
					}
					child = qToolCalls
				case vCall:
					if !obj {
						return false
					}
					child, callFound = qCall, false
				case vFunction:
					if obj {
						child = qFunction
					}
				case vArguments:
					return false // must be a string or null: a 400
				case vText, vModel, vStream, vIncludeUsage, vMaxTokens, vMaxCompletion, vMaxOutput:
					return false // the wrong type: a 400
				case vPrompt:
					if obj {
						return false
					}
					child = qPrompt
				case vPromptElem:
					if obj {
						return false
					}
					child = qTokens
				case vToken:
					return false
				case vRespInput:
					if obj {
						return false
					}
					child = qItems
				case vItem:
					if !obj {
						return false
					}
					child = qItem
				case vRespPrompt:
					if obj {
						r.RemoteInput = true
					}
				case vRemote:
					r.RemoteInput = true
				case vTools:
					child = qTools
				case vTool:
					if obj {
						child, toolTyped = qTool, false
					}
				}
				if depth >= semanticDepth && child != qNone {
					return false
				}
				if depth < semanticDepth {
					ctxs[depth], roles[depth], opens[depth], counts[depth] = child, role, tok.Start, 0
					if obj {
						arrs &^= 1 << depth
					} else {
						arrs |= 1 << depth
					}
				}
				depth++
				cur = child
				continue
			}
			// A scalar in role.
			vs, i := tok.Start, tok.End
			if depth == 1 && field != nil {
				fr.member(view(field), jv.ParseBytes(b[vs:i]))
				field = nil
			}
			switch role {
			case vNone:
			case vRoot:
				return false // not an object: a 400
			case vModel:
				if tok.Kind != jsontok.String || i-vs == 2 {
					return false
				}
				r.Model = cloneString(b[vs:i])
				ed.model = span{vs, i}
			case vStream:
				switch tok.Kind {
				case jsontok.True:
					r.Stream = true
				case jsontok.False, jsontok.Null:
				default:
					return false
				}
			case vStreamOpts:
				if tok.Kind != jsontok.Null {
					return false
				}
				ed.opts, ed.optsNull = span{vs, i}, true
			case vIncludeUsage:
				var typ jv.Type
				switch tok.Kind {
				case jsontok.True:
					r.IncludeUsage, typ = true, jv.True
				case jsontok.False:
					typ = jv.False
				case jsontok.Null:
					typ = jv.Null
				default:
					return false
				}
				ed.include, ed.includeType = span{vs, i}, uint8(typ)
			case vMaxTokens, vMaxCompletion, vMaxOutput:
				v := int64(-1)
				if tok.Kind == jsontok.Number {
					var ok bool
					if v, ok = tokenCount(b[vs:i]); !ok {
						return false
					}
				} else if tok.Kind != jsontok.Null {
					return false
				}
				switch role {
				case vMaxTokens:
					maxTokens = v
					if v >= 0 {
						ed.maxTokens = span{vs, i}
					}
				case vMaxCompletion:
					maxCompletion = v
					if v >= 0 {
						ed.maxCompletion = span{vs, i}
					}
				default:
					maxTokens = v
					if v >= 0 {
						ed.maxOutput = span{vs, i}
					}
				}
			case vMessages, vToolCalls:
				if tok.Kind != jsontok.Null {
					return false
				}
			case vMessage, vPart0, vPart1, vCall, vItem, vToken:
				if role == vToken && tok.Kind == jsontok.Number {
					r.PromptBytes = addSat(r.PromptBytes, TokenBytes)
					break
				}
				return false
			case vContent, vText, vPartContent0, vPrompt, vRespInput, vArguments:
				switch tok.Kind {
				case jsontok.String:
					r.PromptBytes = addSat(r.PromptBytes, int64(tok.DecodedLen()))
				case jsontok.Null:
				default:
					return false
				}
				if role == vArguments {
					callFound = true
				}
			case vPromptElem:
				switch tok.Kind {
				case jsontok.String:
					r.PromptBytes = addSat(r.PromptBytes, int64(tok.DecodedLen()))
				case jsontok.Number:
					r.PromptBytes = addSat(r.PromptBytes, TokenBytes)
				default:
					return false
				}
			case vChoices:
				if tok.Kind == jsontok.Number {
					if v, err := strconv.ParseFloat(view(b[vs:i]), 64); err == nil && v >= 1 && v <= 1<<20 && v == float64(int64(v)) && int64(v) > r.Choices {
						r.Choices = int64(v)
					}
				}
			case vRemote:
				if tok.Kind != jsontok.Null && (tok.Kind != jsontok.String || i-vs != 2) {
					r.RemoteInput = true
				}
			case vToolType:
				if tok.Kind == jsontok.String && remoteTool(b[vs:i]) {
					r.RemoteInput = true
				}
			}
		}
	}
}

// rootRole is the role of the top-level member key for endpoint ep, and
// its bit when it is governed (a second one is refused).
func rootRole(ep Endpoint, key []byte) (uint8, uint16) {
	switch string(key) {
	case "model":
		return vModel, seenModel
	case "stream":
		return vStream, seenStream
	case "stream_options":
		return vStreamOpts, seenStreamOptions
	case "max_tokens":
		if ep == ChatCompletions || ep == Completions || ep == Messages {
			return vMaxTokens, seenMaxTokens
		}
	case "max_completion_tokens":
		if ep == ChatCompletions {
			return vMaxCompletion, seenMaxCompletionTokens
		}
	case "max_output_tokens":
		if ep == Responses {
			return vMaxOutput, seenMaxOutputTokens
		}
	case "messages":
		if ep == ChatCompletions || ep == Messages {
			return vMessages, seenMessages
		}
	case "prompt":
		switch ep {
		case Completions:
			return vPrompt, seenPrompt
		case Responses:
			return vRespPrompt, 0
		}
	case "input":
		switch ep {
		case Embeddings:
			return vPrompt, seenInput
		case Responses:
			return vRespInput, seenInput
		}
	case "instructions":
		if ep == Responses {
			return vText, seenInstructions
		}
	case "system":
		if ep == Messages {
			return vContent, seenSystem
		}
	case "n":
		if ep == ChatCompletions || ep == Completions {
			return vChoices, 0
		}
	case "best_of":
		if ep == Completions {
			return vChoices, 0
		}
	case "previous_response_id", "conversation":
		if ep == Responses {
			return vRemote, 0
		}
	case "tools":
		if ep == Responses {
			return vTools, 0
		}
	}
	return vNone, 0
}

// elemRole is the role of the next element of an array of kind q.
func elemRole(q uint8) uint8 {
	switch q {
	case qMessages:
		return vMessage
	case qParts0:
		return vPart0
	case qParts1:
		return vPart1
	case qToolCalls:
		return vCall
	case qPrompt:
		return vPromptElem
	case qTokens:
		return vToken
	case qItems:
		return vItem
	case qTools:
		return vTool
	}
	return vNone
}

// tokenCount reads an output maximum: a non-negative integer a float64
// carries exactly. ok is false for anything else (a 400).
func tokenCount(raw []byte) (int64, bool) {
	v, err := strconv.ParseFloat(view(raw), 64)
	if err != nil || v < 0 || v > maxExactInt || v != float64(int64(v)) {
		return 0, false
	}
	return int64(v), true
}

// remoteTool reports whether a tool's type (a string token, or an object
// or array's bytes) names a tool that reads input the body does not hold.
func remoteTool(raw []byte) bool {
	if raw[0] == '"' && bytes.IndexByte(raw, '\\') >= 0 {
		s := jsontok.Text(raw, false)
		return strings.Contains(s, "search") || strings.Contains(s, "file")
	}
	return bytes.Contains(raw, []byte("search")) || bytes.Contains(raw, []byte("file"))
}

// cloneString is the decoded text of a string token, as a new string.
func cloneString(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	return jsontok.Text(raw, false)
}
