package llm

import (
	"bytes"
	"math/bits"
	"strings"

	"github.com/tokentriage/tokentriage/shared/jsontok"
)

// This file is the scanner's fast path: one pass over an event's JSON that
// checks its syntax (the rules of checkSyntax) and gathers, on the way,
// the few members the scanner reads (the model, the streamed text, the
// usage object, the event type). Every event used to go through gjson's
// iterators, which walk nested values more than once and unescape every
// string they hand out; in the wasm filter that cost 10 to 20 µs per event
// against about 1 µs natively. See
// RATIONALE.md#why-does-the-stream-scanner-read-events-in-one-pass.
//
// The fast path gives exactly what the jv path (openAIChunk,
// responsesEvent, anthropicEvent) gives: it applies nothing until the
// whole event has been read, and it gives up (walkEvent returns false) on
// anything whose jv reading (shared/jsontok/jv, gjson's reading of a
// valid document) it does not mirror: invalid JSON (read up to its fault,
// then for its last valid usage object), a key spelt with escapes where keys matter,
// nesting deeper than walkDepth, and shapes no provider sends (a string
// where tool calls belong, an array where a function object belongs).
// The scanner then takes the jv path, unchanged. TestEventWalkMatchesGJSON
// and FuzzEventWalk hold the two to the same results.

// walkDepth bounds the nesting the fast path follows.
const walkDepth = 64

// Contexts: what the members or elements of an open container are.
const (
	cNone      uint8 = iota // nothing inside matters
	cUsage                  // a usage object: only its span matters
	cChatRoot               // a chat or completions chunk
	cChoices                // its choices array
	cChoice                 // one choice
	cChatDelta              // a choice's delta
	cToolCalls              // a delta's tool_calls (array or object)
	cCall                   // one tool call
	cFunction               // a tool call's function, arguments not yet seen
	cRespRoot               // a responses event
	cResponse               // its response object
	cMsgRoot                // an Anthropic event
	cMessage                // its message object
	cMsgDelta               // its delta object
)

// Roles: what the next value is.
const (
	rNone      uint8 = iota
	rRoot            // the event itself
	rModel           // a model name (first non-empty string wins)
	rText            // streamed text: its decoded length counts
	rChoices         // chat: choices
	rChoice          // chat: one element of choices
	rChatDelta       // chat: a choice's delta
	rToolCalls       // chat: a delta's tool_calls
	rCall            // chat: one tool call
	rFunction        // chat: a call's function
	rArguments       // chat: a function's arguments
	rUsage           // top-level usage (chat, Anthropic): the last wins
	rType            // responses, Anthropic: the event type (the last wins)
	rRespDelta       // responses: delta (the last wins)
	rResponse        // responses: response (the last wins)
	rRespUsage       // responses: response.usage (the last with counts wins)
	rMessage         // Anthropic: message (the last wins)
	rMsgUsage        // Anthropic: message.usage (each with counts merges)
	rMsgDelta        // Anthropic: delta (the last wins)
)

// span is a value's bytes within the event as [start, end); end 0 means
// none.
type span struct{ start, end int }

// eventFacts is what walkEvent gathered from one event.
type eventFacts struct {
	text      int64 // streamed text bytes: every chat choice's; the last Anthropic delta's
	model     span  // the first model candidate (in the last response or message object)
	choices   int   // elements of the last choices array; -1 without one
	usage     span  // the last top-level usage member, when it is an object
	typ       span  // the last type member, when it is a string
	respDelta span  // responses: the last delta member, when it is a string
	respObj   bool  // responses: the last response member is an object
	respUsage counts
	respHave  bool // respUsage holds counts
	msgObj    bool // Anthropic: the last message member is an object
	msgUsage  counts
	msgHave   bool // msgUsage holds counts
	deltaObj  bool // Anthropic: the last delta member is an object
	callFound bool // chat: the current tool call's arguments were read
}

// roleOf is the role of the value of member key in context ctx. ok is false
// when the key has escapes in a context where keys matter.
func roleOf(ctx uint8, key []byte, esc bool) (role uint8, ok bool) {
	switch ctx {
	case cNone, cUsage:
		return rNone, true
	case cToolCalls:
		return rCall, true // an object of calls: every member is one
	}
	if esc {
		return rNone, false
	}
	switch ctx {
	case cChatRoot:
		switch string(key) {
		case "model":
			return rModel, true
		case "choices":
			return rChoices, true
		case "usage":
			return rUsage, true
		}
	case cChoice:
		switch string(key) {
		case "text":
			return rText, true
		case "delta":
			return rChatDelta, true
		}
	case cChatDelta:
		switch string(key) {
		case "content", "refusal":
			return rText, true
		case "tool_calls":
			return rToolCalls, true
		}
	case cCall:
		if string(key) == "function" {
			return rFunction, true
		}
	case cFunction:
		if string(key) == "arguments" {
			return rArguments, true
		}
	case cRespRoot:
		switch string(key) {
		case "type":
			return rType, true
		case "delta":
			return rRespDelta, true
		case "response":
			return rResponse, true
		}
	case cResponse:
		switch string(key) {
		case "model":
			return rModel, true
		case "usage":
			return rRespUsage, true
		}
	case cMsgRoot:
		switch string(key) {
		case "type":
			return rType, true
		case "message":
			return rMessage, true
		case "delta":
			return rMsgDelta, true
		case "usage":
			return rUsage, true
		}
	case cMessage:
		switch string(key) {
		case "model":
			return rModel, true
		case "usage":
			return rMsgUsage, true
		}
	case cMsgDelta:
		switch string(key) {
		case "text", "partial_json", "thinking":
			return rText, true
		}
	}
	return rNone, true
}

// walkEvent reads the JSON object b in one pass for the endpoint whose
// top-level context is root (cChatRoot, cRespRoot or cMsgRoot) and fills
// f, reading b's tokens with t. It returns false when b is not valid JSON
// or is something the fast path leaves to jv; f is then meaningless.
//
// When rec is not nil, walkEvent appends to it the values an event of the
// same shape may vary in (see eventShape).
func walkEvent(t *jsontok.Tokenizer, b []byte, root uint8, f *eventFacts, rec *[]hole) bool {
	*f = eventFacts{choices: -1}
	var (
		ctxs  [walkDepth]uint8 // context of each open container
		roles [walkDepth]uint8 // the role its value had
		opens [walkDepth]int   // where it opened
		arrs  uint64           // bit d: the container at depth d is an array
	)
	t.Reset(b, jsontok.GJSON)
	depth := 0
	usageAt := 0 // depth of the outermost open usage object, 0 outside one: its values are read, never holes
	cur := cNone // context of the innermost open container
	role := rRoot
	for {
		toks := t.Batch()
		for k := range toks {
			tok := &toks[k]
			switch tok.Kind {
			case jsontok.Key:
				var ok bool
				if role, ok = roleOf(cur, b[tok.Start+1:tok.End-1], tok.Shrink > 0); !ok {
					return false
				}
				continue
			case jsontok.ObjectEnd, jsontok.ArrayEnd:
				// Close the innermost container.
				if depth == usageAt {
					usageAt = 0
				}
				depth--
				if ctxs[depth] == cUsage {
					u := span{opens[depth], tok.End}
					switch roles[depth] {
					case rUsage:
						f.usage = u
					case rRespUsage:
						if c, ok := readCountsRaw(b[u.start:u.end]); ok {
							f.respUsage, f.respHave = c, true
						}
					case rMsgUsage:
						if c, ok := readCountsRaw(b[u.start:u.end]); ok {
							// message_start's output_tokens is a placeholder; the
							// count arrives in message_delta.
							c.out, c.has = 0, c.has&^hasOut
							f.msgUsage.merge(c)
							f.msgHave = true
						}
					}
				}
				if depth > 0 {
					cur = ctxs[depth-1]
				}
				continue
			case jsontok.End:
				return true
			case jsontok.Err:
				return false
			}
			// A value: an element of an array takes its role from the
			// array's context.
			if depth > 0 && arrs&(1<<(depth-1)) != 0 {
				role = elementRole(cur, f)
			} else if depth == 0 && tok.Kind != jsontok.ObjectStart {
				return false // not an object: [DONE], or not JSON
			}
			if obj := tok.Kind == jsontok.ObjectStart; obj || tok.Kind == jsontok.ArrayStart {
				if depth == walkDepth {
					return false
				}
				child := cNone
				switch role {
				case rRoot:
					child = root
				case rChoices:
					if !obj {
						child, f.choices = cChoices, 0
					}
				case rChoice:
					if obj {
						child = cChoice
					}
				case rChatDelta:
					if obj {
						child = cChatDelta
					}
				case rToolCalls:
					child = cToolCalls
				case rCall:
					if !obj {
						return false // gjson would look for the function path in an array
					}
					child, f.callFound = cCall, false
				case rFunction:
					if !f.callFound {
						if !obj {
							return false
						}
						child = cFunction
					}
				case rArguments:
					f.callFound = true // not a string: no text
				case rUsage:
					f.usage = span{}
					if obj {
						child = cUsage
					}
				case rRespUsage, rMsgUsage:
					if obj {
						child = cUsage
					}
				case rType:
					f.typ = span{}
				case rRespDelta:
					f.respDelta = span{}
				case rResponse:
					f.respObj, f.respHave, f.respUsage, f.model = obj, false, counts{}, span{}
					if obj {
						child = cResponse
					}
				case rMessage:
					f.msgObj, f.msgHave, f.msgUsage, f.model = obj, false, counts{}, span{}
					if obj {
						child = cMessage
					}
				case rMsgDelta:
					f.deltaObj, f.text = obj, 0
					uncount(rec)
					if obj {
						child = cMsgDelta
					}
				}
				ctxs[depth], roles[depth], opens[depth] = child, role, tok.Start
				if obj {
					arrs &^= 1 << depth
				} else {
					arrs |= 1 << depth
				}
				depth++
				if child == cUsage && usageAt == 0 {
					usageAt = depth
				}
				cur = child
				continue
			}
			// A scalar in role.
			vs, i := tok.Start, tok.End
			str := tok.Kind == jsontok.String
			switch {
			case str:
				if role == rText {
					f.text = addSat(f.text, int64(tok.DecodedLen()))
				}
				if rec != nil && usageAt == 0 && (role == rNone || role == rText || role == rRespDelta || role == rArguments) {
					*rec = append(*rec, hole{start: vs, end: i, str: true, text: role == rText || role == rArguments && !f.callFound, tl: int64(tok.DecodedLen())})
				}
			case tok.Kind == jsontok.Number:
				if rec != nil && usageAt == 0 && (role == rNone || role == rText) {
					*rec = append(*rec, hole{start: vs, end: i})
				}
			}
			switch role {
			case rModel:
				if str && f.model.end == 0 && i-vs > 2 {
					f.model = span{vs, i}
				}
			case rArguments:
				if !f.callFound {
					f.callFound = true
					if str {
						f.text = addSat(f.text, int64(tok.DecodedLen()))
					}
				}
			case rToolCalls, rCall:
				if str {
					return false // gjson would look for the function path inside the string
				}
			case rUsage:
				f.usage = span{}
			case rType:
				f.typ = span{}
				if str {
					f.typ = span{vs, i}
				}
			case rRespDelta:
				f.respDelta = span{}
				if str {
					f.respDelta = span{vs, i}
				}
			case rResponse:
				f.respObj, f.respHave, f.respUsage, f.model = false, false, counts{}, span{}
			case rMessage:
				f.msgObj, f.msgHave, f.msgUsage, f.model = false, false, counts{}, span{}
			case rMsgDelta:
				f.deltaObj, f.text = false, 0
				uncount(rec)
			}
		}
	}
}

// elementRole is the role of the next element of an array in context ctx.
func elementRole(ctx uint8, f *eventFacts) uint8 {
	switch ctx {
	case cChoices:
		f.choices++
		return rChoice
	case cToolCalls:
		return rCall
	}
	return rNone
}

// uncount marks the holes recorded so far as not counting toward the
// text: a reset (a later Anthropic delta member) dropped what they added.
func uncount(rec *[]hole) {
	if rec == nil {
		return
	}
	for k := range *rec {
		(*rec)[k].text = false
	}
}

// maxShapeBytes bounds the event an eventShape keeps.
const maxShapeBytes = 4 << 10

// eventShape is the shape of the last event the fast path walked: its
// bytes, with the values that may differ between events of one stream
// (ids, counters, the streamed text) marked as holes. The holes are the
// string and number values whose role is none or text (and the responses
// delta): walking one changes nothing but the text count. So an event
// that equals the shape's byte for byte outside the holes, with a valid
// value of the same kind in each, walks exactly as the shape's event did,
// and its facts are the shape's with its own text (and delta): what a
// stream of one chunk per token sends, bar its first and last chunks. The
// match costs a few comparisons and one scan per hole instead of a walk.
type eventShape struct {
	raw       []byte // the event the shape was taken from
	holes     []hole
	facts     eventFacts // spans into raw
	deltaHole int        // the hole holding the last responses delta, or -1
	ok        bool
}

// hole is one value of a shape's event that may vary.
type hole struct {
	start, end int   // the value's bytes in raw
	str        bool  // a string (else a number)
	text       bool  // its decoded length counts toward the text
	tl         int64 // that length, for a string
}

// keep makes the shape that of the event ev, whose data (at off) walkEvent
// read into f recording holes.
func (sh *eventShape) keep(ev []byte, off int, holes []hole, f *eventFacts) {
	sh.raw = append(sh.raw[:0], ev...)
	sh.holes = sh.holes[:0]
	for _, h := range holes {
		h.start += off
		h.end += off
		sh.holes = append(sh.holes, h)
	}
	sh.facts = *f
	for _, sp := range []*span{&sh.facts.model, &sh.facts.usage, &sh.facts.typ, &sh.facts.respDelta} {
		if sp.end != 0 {
			sp.start += off
			sp.end += off
		}
	}
	sh.deltaHole = -1
	if f.respDelta.end != 0 {
		for k := range sh.holes {
			if sh.holes[k].start == sh.facts.respDelta.start {
				sh.deltaHole = k
			}
		}
	}
	sh.ok = true
}

// match reports whether b starts with an event of the shape, n bytes long,
// and if so fills f with that event's facts: the shape's, with its own
// text and responses delta (the delta a span of b, every other span one
// of sh.raw). It compares b with the shape's event eight bytes at a time
// and rescans only the holes where they differ: a hole left byte for byte
// as it was holds the same valid value. A string value holds no line
// end, so a match is one whole event of the shape's lines.
func (sh *eventShape) match(b []byte, f *eventFacts) (n int, ok bool) {
	if !sh.ok {
		return 0, false
	}
	raw := sh.raw
	text := sh.facts.text
	delta := span{}
	pos, j := 0, 0 // raw[:pos] and b[:j] agree, up to the holes rescanned
	next := 0      // the first hole not yet passed
	for {
		c := commonPrefix(raw[pos:], b[j:])
		pos += c
		j += c
		if pos == len(raw) {
			break
		}
		// The first difference must fall in a hole (or just after a
		// number, which may have grown).
		k := next
		for k < len(sh.holes) && sh.holes[k].end < pos {
			k++
		}
		if k == len(sh.holes) {
			return 0, false
		}
		h := &sh.holes[k]
		if pos < h.start || pos == h.end && h.str {
			return 0, false
		}
		if sh.deltaHole >= next && sh.deltaHole < k {
			d := &sh.holes[sh.deltaHole]
			delta = span{d.start + j - pos, d.end + j - pos}
		}
		// Rescan the value from its start in b.
		j -= pos - h.start
		vs := j
		if j == len(b) {
			return 0, false
		}
		if h.str {
			if b[j] != '"' {
				return 0, false
			}
			end, shrink, code := jsontok.ScanString(b, j, false)
			if code != jsontok.ErrNone {
				return 0, false
			}
			j = end
			if h.text {
				text += int64(end-vs-2-shrink) - h.tl
			}
		} else {
			if c := b[j]; c != '-' && (c < '0' || c > '9') {
				return 0, false
			}
			end, code := jsontok.ScanNumber(b, j)
			if code != jsontok.ErrNone {
				return 0, false
			}
			j = end
		}
		if k == sh.deltaHole {
			delta = span{vs, j}
		}
		pos = h.end
		next = k + 1
	}
	if sh.deltaHole >= next {
		d := &sh.holes[sh.deltaHole]
		delta = span{d.start + j - pos, d.end + j - pos}
	}
	*f = sh.facts
	f.text, f.respDelta = text, delta
	return j, true
}

// commonPrefix is the length of the longest common prefix of a and b,
// found sixteen bytes at a time.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+16 <= n {
		if x := word(a, i) ^ word(b, i); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
		if x := word(a, i+8) ^ word(b, i+8); x != 0 {
			return i + 8 + bits.TrailingZeros64(x)/8
		}
		i += 16
	}
	if n >= 8 {
		// The last bytes: a word that may overlap what agreed already
		// (bytes before i agree, so its first difference is at i or
		// later), not a loop over single bytes.
		if i+8 <= n {
			if x := word(a, i) ^ word(b, i); x != 0 {
				return i + bits.TrailingZeros64(x)/8
			}
		}
		if x := word(a, n-8) ^ word(b, n-8); x != 0 {
			return n - 8 + bits.TrailingZeros64(x)/8
		}
		return n
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// walk reads an event's data into f, and makes the event the shape when
// off (where the data starts in ev) is not -1. ok is false when the data
// needs the jv path.
func (s *StreamScanner) walk(data []byte, root uint8, f *eventFacts, ev []byte, off int) bool {
	if s.tok == nil {
		s.tok = new(jsontok.Tokenizer)
	}
	if off < 0 {
		return walkEvent(s.tok, data, root, f, nil)
	}
	s.holes = s.holes[:0]
	if !walkEvent(s.tok, data, root, f, &s.holes) {
		return false
	}
	s.shape.keep(ev, off, s.holes, f)
	return true
}

// applyFacts applies the facts of a whole event ev that matched the shape.
func (s *StreamScanner) applyFacts(f *eventFacts, raw, ev []byte) (strip bool) {
	switch s.ep {
	case ChatCompletions, Completions:
		return s.applyOpenAI(f, raw)
	case Responses:
		s.applyResponses(f, raw, ev)
	case Messages:
		s.applyAnthropic(f, raw)
	}
	return false
}

// fastOpenAIChunk is openAIChunk over walkEvent; ok is false when the
// event needs the jv path.
func (s *StreamScanner) fastOpenAIChunk(data, ev []byte, off int) (strip, ok bool) {
	if !s.walk(data, cChatRoot, &s.facts, ev, off) {
		return false, false
	}
	return s.applyOpenAI(&s.facts, data), true
}

// applyOpenAI is what openAIChunk does with a chunk's facts, whose spans
// point into src.
func (s *StreamScanner) applyOpenAI(f *eventFacts, src []byte) (strip bool) {
	if f.model.end != 0 && s.model == "" {
		s.model = strings.Clone(f.model.str(src))
	}
	s.textBytes = addSat(s.textBytes, f.text)
	if f.usage.end == 0 {
		return false
	}
	c, have := readCountsRaw(src[f.usage.start:f.usage.end])
	if !have {
		return false
	}
	s.openai, s.haveOpenAI = c, true
	if s.strip && f.choices == 0 {
		s.stripped++ // the walk checked the event's syntax
		return true
	}
	return false
}

// fastResponsesEvent is responsesEvent over walkEvent.
func (s *StreamScanner) fastResponsesEvent(data, ev []byte, off int) bool {
	if !s.walk(data, cRespRoot, &s.facts, ev, off) {
		return false
	}
	s.applyResponses(&s.facts, data, data)
	return true
}

// applyResponses is what responsesEvent does with an event's facts; the
// delta's span points into dsrc, the others into src.
func (s *StreamScanner) applyResponses(f *eventFacts, src, dsrc []byte) {
	if f.typ.end != 0 && f.respDelta.end != 0 {
		switch f.typ.str(src) {
		case "response.output_text.delta", "response.refusal.delta", "response.function_call_arguments.delta":
			s.textBytes = addSat(s.textBytes, int64(jsontok.DecodedLen(dsrc[f.respDelta.start:f.respDelta.end])))
		}
	}
	if !f.respObj {
		return
	}
	if f.model.end != 0 && s.model == "" {
		s.model = strings.Clone(f.model.str(src))
	}
	if f.respHave {
		s.openai, s.haveOpenAI = f.respUsage, true
	}
}

// fastAnthropicEvent is anthropicEvent over walkEvent.
func (s *StreamScanner) fastAnthropicEvent(data, ev []byte, off int) bool {
	if !s.walk(data, cMsgRoot, &s.facts, ev, off) {
		return false
	}
	s.applyAnthropic(&s.facts, data)
	return true
}

// applyAnthropic is what anthropicEvent does with an event's facts, whose
// spans point into src.
func (s *StreamScanner) applyAnthropic(f *eventFacts, src []byte) {
	if f.typ.end == 0 {
		return
	}
	switch f.typ.str(src) {
	case "message_start":
		if f.msgObj {
			if f.model.end != 0 && s.model == "" {
				s.model = strings.Clone(f.model.str(src))
			}
			if f.msgHave {
				s.anthropic.merge(f.msgUsage)
			}
		}
	case "message_delta":
		if f.usage.end != 0 {
			if c, ok := readCountsRaw(src[f.usage.start:f.usage.end]); ok {
				s.anthropic.merge(c)
			}
		}
	case "content_block_delta":
		if f.deltaObj {
			s.textBytes = addSat(s.textBytes, f.text)
		}
	}
}

// str is the decoded text of a string token (gjson's unescaping), aliasing
// b when it has no escapes.
func (sp span) str(b []byte) string {
	raw := b[sp.start:sp.end]
	if bytes.IndexByte(raw, '\\') >= 0 {
		return jsontok.Text(raw, false)
	}
	return view(raw[1 : len(raw)-1])
}
