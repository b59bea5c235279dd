package llm

import (
	"bytes"
	"math/bits"
	"strings"

	"github.com/tokentriage/tokentriage/shared/jsontok/jv"

	"github.com/tokentriage/tokentriage/shared/jsontok"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// MaxEventBytes is the longest SSE event the scanner holds and parses
// whole. A longer event is forwarded as its bytes arrive and only its last
// eventTailBytes are kept, from which a trailing usage object is still read
// (an OpenAI responses stream's response.completed event repeats the whole
// output before its usage); its streamed text is not counted.
const MaxEventBytes = 64 << 10

// eventTailBytes is how much of an oversized event is kept.
const eventTailBytes = 4 << 10

// StreamScanner reads a server-sent-events response of one endpoint as it
// passes, chunk by chunk, and records the usage it carries:
//
//   - OpenAI chat and completions: the usage of any chunk that has one (the
//     last wins), which the provider sends in a final chunk with empty
//     choices when the request set stream_options.include_usage;
//   - OpenAI responses: response.usage of response.completed (or
//     response.incomplete / response.failed);
//   - Anthropic messages: message_start's message.usage (input and cache
//     tokens) and message_delta's usage (output, cumulative; any input
//     fields it carries replace message_start's).
//
// It also counts the streamed text bytes (chat delta content, refusal and
// tool call arguments; completions text; responses output text, refusal
// and function call argument deltas; Anthropic text_delta text,
// input_json_delta partial_json and thinking_delta thinking), so that Usage
// can estimate the output when the provider reported none.
//
// The scanner processes event by event and keeps only the incomplete
// trailing event between chunks (at most MaxEventBytes of it); a stream is
// never buffered whole. Lines may end in LF, CRLF or CR. Without stripping,
// Feed forwards every byte at once. With stripping (stripUsageChunk on a
// chat or completions stream), Feed forwards each complete event except the
// usage-only chunk (empty choices and a usage object, valid JSON), holding
// an incomplete event until it completes; everything else passes byte for
// byte, comments, `data: [DONE]` and line endings included.
//
// A StreamScanner is not safe for concurrent use.
type StreamScanner struct {
	ep    Endpoint
	strip bool

	midLine bool // the current line has bytes
	cr      bool // the last byte was a CR whose line ending is undecided

	held []byte // the current event so far, while at most MaxEventBytes
	over bool   // the current event outgrew MaxEventBytes
	tail []byte // the last eventTailBytes of an oversized event
	data []byte // scratch: the data lines of one event joined

	gjsonOnly bool // tests: read every event through gjson

	tok   *jsontok.Tokenizer // the fast path's reader, kept across Reset
	facts eventFacts         // scratch for the fast path
	shape eventShape         // the shape of the last event the fast path walked
	holes []hole             // scratch: the holes of the event being walked

	openai     counts // the last OpenAI-shaped usage seen
	haveOpenAI bool
	anthropic  counts // Anthropic usage, merged across events

	model       string
	textBytes   int64
	promptBytes int64
	stripped    int

	// While Pass runs: the chunk, how much of it was forwarded as is
	// (chunk[:next]), and whether what is forwarded still is that prefix
	// (lazy) or has been copied into dst.
	chunk []byte
	next  int
	lazy  bool
}

// NewStreamScanner returns a scanner for a stream answering the endpoint at
// path. stripUsageChunk asks it to remove the usage-only chunk from what it
// forwards; set it when the gateway injected include_usage into a request
// that did not ask for it (InjectIncludeUsage). It only has an effect on
// chat and completions streams.
func NewStreamScanner(path string, stripUsageChunk bool) *StreamScanner {
	ep := EndpointOf(path)
	return &StreamScanner{ep: ep, strip: stripUsageChunk && (ep == ChatCompletions || ep == Completions)}
}

// Reset makes s a new scanner for a stream answering the endpoint at path,
// as NewStreamScanner does, keeping the buffers it grew: a filter that
// scans one stream after another allocates nothing per stream.
func (s *StreamScanner) Reset(path string, stripUsageChunk bool) {
	ep := EndpointOf(path)
	*s = StreamScanner{
		ep:    ep,
		strip: stripUsageChunk && (ep == ChatCompletions || ep == Completions),
		held:  reuse(s.held),
		tail:  reuse(s.tail),
		data:  reuse(s.data),
		shape: eventShape{raw: reuse(s.shape.raw), holes: s.shape.holes[:0]},
		holes: s.holes[:0],
		tok:   s.tok,
	}
}

// reuse empties a buffer for the next stream, or drops it when an unusual
// event grew it past what is worth keeping.
func reuse(b []byte) []byte {
	if cap(b) > 16<<10 {
		return nil
	}
	return b[:0]
}

// SetPromptBytes gives the scanner the request's PromptBytes, so that an
// estimated input (when the provider reports none) is EstimateTokens of it.
func (s *StreamScanner) SetPromptBytes(n int64) { s.promptBytes = n }

// Feed processes the next chunk of the stream and returns dst with the
// bytes to forward for it appended.
func (s *StreamScanner) Feed(chunk, dst []byte) []byte {
	out, changed := s.Pass(chunk, false, dst)
	switch {
	case !changed:
		return append(dst, chunk...)
	case s.lazy: // a prefix of chunk
		return append(dst, out...)
	}
	return out
}

// Pass processes the next chunk of the stream, ending the stream (as
// Finish does) when eos is set, for a caller that forwards chunk itself:
// when the bytes to forward are chunk unchanged, it returns chunk and
// false, without copying; when they are a prefix of chunk (the rest held
// or dropped), that prefix and true; otherwise dst with them appended, and
// true. Without stripping, it never copies.
func (s *StreamScanner) Pass(chunk []byte, eos bool, dst []byte) (out []byte, changed bool) {
	if !eos && !s.cr && !s.midLine && len(s.held) == 0 && !s.over && s.shape.ok {
		// A chunk that is one whole event of the last event's shape (a
		// provider flushes one event per chunk): read it here, not
		// through feed's loop, which costs as much again in the guest.
		if n, ok := s.shape.match(chunk, &s.facts); ok && n == len(chunk) {
			if s.applyFacts(&s.facts, s.shape.raw, chunk) && s.strip {
				return chunk[:0], true
			}
			return chunk, false
		}
	}
	s.chunk, s.next, s.lazy = chunk, 0, true
	dst = s.feed(chunk, dst)
	if eos {
		dst = s.finish(dst)
	}
	lazy, next := s.lazy, s.next
	s.chunk = nil
	switch {
	case !s.strip:
		return chunk, false
	case lazy && next == len(chunk):
		return chunk, false
	case lazy:
		return chunk[:next], true
	}
	return dst, true
}

// emit forwards x: while x continues the chunk where the forwarded prefix
// ends, the prefix grows; otherwise the forwarded bytes are copied into
// dst, and x after them.
func (s *StreamScanner) emit(dst, x []byte) []byte {
	if len(x) == 0 {
		return dst
	}
	if s.lazy {
		if rest := s.chunk[s.next:]; len(x) <= len(rest) && &x[0] == &rest[0] {
			s.next += len(x)
			return dst
		}
		dst = append(dst, s.chunk[:s.next]...)
		s.lazy = false
	}
	return append(dst, x...)
}

// feed scans chunk; with stripping it emits what to forward.
func (s *StreamScanner) feed(chunk, dst []byte) []byte {
	start, i := 0, 0
	if !s.cr {
		// LF line endings (the common case): jump from line end to line
		// end, until a CR (if any) hands the rest to the byte loop below.
		for i < len(chunk) {
			if start == i && !s.midLine && len(s.held) == 0 && !s.over && s.shape.ok {
				// At an event's start: an event with the shape of the last
				// one is read whole, without looking for its lines.
				if n, ok := s.shape.match(chunk[i:], &s.facts); ok {
					ev := chunk[i : i+n]
					if drop := s.applyFacts(&s.facts, s.shape.raw, ev); s.strip && !drop {
						dst = s.emit(dst, ev)
					}
					i += n
					start = i
					continue
				}
			}
			j := i + lineStop(chunk[i:])
			if j == len(chunk) {
				s.midLine = true
				i = j
				break
			}
			if chunk[j] == '\r' {
				break
			}
			if j > i {
				s.midLine = true
			}
			i = j + 1
			if s.midLine {
				s.midLine = false
			} else {
				dst = s.complete(chunk[start:i], dst)
				start = i
			}
		}
	}
	for ; i < len(chunk); i++ {
		c := chunk[i]
		if s.cr {
			s.cr = false
			end := i // a lone CR ended the line before c
			if c == '\n' {
				end = i + 1 // CRLF ends with c
			}
			if s.midLine {
				s.midLine = false
			} else {
				dst = s.complete(chunk[start:end], dst)
				start = end
			}
			if c == '\n' {
				continue
			}
		}
		switch c {
		case '\r':
			s.cr = true
		case '\n':
			if s.midLine {
				s.midLine = false
			} else {
				dst = s.complete(chunk[start:i+1], dst)
				start = i + 1
			}
		default:
			s.midLine = true
		}
	}
	if start < len(chunk) {
		dst = s.hold(chunk[start:], dst)
	}
	return dst
}

// Sixteen bytes at a time: a byte of the mask t in lineStop has its high
// bit set where x's byte is a match, and the borrows of the subtraction
// can only mark bytes above a match, so the lowest mark is exact. In wasm
// a loop over single bytes costs about 15 ns a byte, one that tests a
// word at a time under 2.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// lineStop returns the offset of the first CR or LF in b, or len(b),
// testing sixteen bytes at a time.
func lineStop(b []byte) int {
	n := len(b)
	i := 0
	for i+16 <= n {
		x, y := word(b, i), word(b, i+8)
		lx, cx := x^(ones*'\n'), x^(ones*'\r')
		t := ((lx - ones) &^ lx) | ((cx - ones) &^ cx)
		ly, cy := y^(ones*'\n'), y^(ones*'\r')
		u := ((ly - ones) &^ ly) | ((cy - ones) &^ cy)
		if (t|u)&highs != 0 {
			if t &= highs; t != 0 {
				return i + bits.TrailingZeros64(t)/8
			}
			return i + 8 + bits.TrailingZeros64(u&highs)/8
		}
		i += 16
	}
	for i < n && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}

// Finish ends the stream: a pending event (a blank line ended by a final
// CR, or a last event with no blank line after it) is parsed for usage and
// returned appended to dst. A trailing unterminated event is never
// stripped.
func (s *StreamScanner) Finish(dst []byte) []byte {
	s.chunk, s.next, s.lazy = nil, 0, false
	return s.finish(dst)
}

func (s *StreamScanner) finish(dst []byte) []byte {
	if s.cr {
		s.cr = false
		if !s.midLine {
			dst = s.complete(nil, dst)
		}
	}
	s.midLine = false
	switch {
	case s.over:
		s.degraded()
		s.over = false
		s.tail = s.tail[:0]
	case len(s.held) > 0:
		s.event(s.held)
		if s.strip {
			dst = s.emit(dst, s.held)
		}
		s.held = s.held[:0]
	}
	return dst
}

// hold keeps the start of an incomplete event.
func (s *StreamScanner) hold(rest, dst []byte) []byte {
	if !s.over && len(s.held)+len(rest) <= MaxEventBytes {
		s.held = append(s.held, rest...)
		return dst
	}
	return s.overflow(rest, dst)
}

// overflow moves the current event to (or keeps it in) oversized mode:
// forward what is held and rest, keep the tail.
func (s *StreamScanner) overflow(rest, dst []byte) []byte {
	if !s.over {
		s.over = true
		s.tail = s.tail[:0]
		s.keepTail(s.held)
		if s.strip {
			dst = s.emit(dst, s.held)
		}
		s.held = s.held[:0]
	}
	s.keepTail(rest)
	if s.strip {
		dst = s.emit(dst, rest)
	}
	return dst
}

// keepTail appends b to the kept tail, compacting to the last
// eventTailBytes once it holds twice that (amortised constant work per
// byte, however small the chunks).
func (s *StreamScanner) keepTail(b []byte) {
	if len(b) >= eventTailBytes {
		s.tail = append(s.tail[:0], b[len(b)-eventTailBytes:]...)
		return
	}
	if len(s.tail)+len(b) > 2*eventTailBytes {
		s.tail = s.tail[:copy(s.tail, s.tail[len(s.tail)-eventTailBytes:])]
	}
	s.tail = append(s.tail, b...)
}

// lastTail is the last eventTailBytes of the kept tail.
func (s *StreamScanner) lastTail() []byte {
	if len(s.tail) > eventTailBytes {
		return s.tail[len(s.tail)-eventTailBytes:]
	}
	return s.tail
}

// complete ends the current event with part (its last bytes).
func (s *StreamScanner) complete(part, dst []byte) []byte {
	if s.over || len(s.held)+len(part) > MaxEventBytes {
		dst = s.overflow(part, dst)
		s.degraded()
		s.over = false
		s.tail = s.tail[:0]
		return dst
	}
	ev := part
	if len(s.held) > 0 {
		s.held = append(s.held, part...)
		ev = s.held
	}
	if drop := s.event(ev); s.strip && !drop {
		dst = s.emit(dst, ev)
	}
	s.held = s.held[:0]
	return dst
}

// event parses one complete event and reports whether to strip it.
func (s *StreamScanner) event(ev []byte) bool {
	if !s.gjsonOnly {
		if n, ok := s.shape.match(ev, &s.facts); ok && n == len(ev) {
			return s.applyFacts(&s.facts, s.shape.raw, ev)
		}
	}
	data, off := s.dataOf(ev)
	if len(data) == 0 {
		return false
	}
	switch s.ep {
	case ChatCompletions, Completions:
		if !s.gjsonOnly {
			if strip, ok := s.fastOpenAIChunk(data, ev, off); ok {
				return strip
			}
		}
		return s.openAIChunk(data)
	case Responses:
		if s.gjsonOnly || !s.fastResponsesEvent(data, ev, off) {
			s.responsesEvent(data)
		}
	case Messages:
		if s.gjsonOnly || !s.fastAnthropicEvent(data, ev, off) {
			s.anthropicEvent(data)
		}
	}
	return false
}

// dataOf returns an event's data: its data lines' values joined by LF
// (in s.data when there are several). off is where the data starts in ev
// when the event may become the shape (one data line, the event's last,
// LF line endings), else -1.
func (s *StreamScanner) dataOf(ev []byte) (data []byte, off int) {
	lines := 0
	pos := 0    // where rest starts in ev
	cr := false // a line ended in CR
	rest := ev
	for len(rest) > 0 {
		j := lineStop(rest)
		line := rest[:j]
		if j < len(rest) && rest[j] == '\r' {
			cr = true
			if j+1 < len(rest) && rest[j+1] == '\n' {
				j++
			}
		}
		if j < len(rest) {
			j++
		}
		lineAt := pos
		rest, pos = rest[j:], pos+j
		if len(line) == 0 || line[0] == ':' {
			continue
		}
		field, value := line, line[len(line):]
		if c := bytes.IndexByte(line, ':'); c >= 0 {
			field, value = line[:c], line[c+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		if string(field) != "data" {
			continue
		}
		switch lines {
		case 0:
			data = value
			off = lineAt + len(line) - len(value)
		case 1:
			s.data = append(append(append(s.data[:0], data...), '\n'), value...)
			data = s.data
		default:
			s.data = append(append(s.data, '\n'), value...)
			data = s.data
		}
		lines++
	}
	if lines != 1 || cr || off+len(data)+2 != len(ev) || len(ev) > maxShapeBytes {
		off = -1
	}
	return data, off
}

// openAIChunk reads a chat or completions chunk and reports whether it is
// the usage-only chunk to strip.
func (s *StreamScanner) openAIChunk(data []byte) bool {
	root := jv.Parse(view(data))
	if !root.IsObject() {
		return false // data: [DONE], or not JSON
	}
	var usage jv.Value
	choices := -1
	root.ForEach(func(k, v jv.Value) bool {
		switch k.Str {
		case "model":
			s.setModel(v)
		case "choices":
			if v.IsArray() {
				choices = 0
				v.ForEach(func(_, ch jv.Value) bool {
					choices++
					s.choiceText(ch)
					return true
				})
			}
		case "usage":
			usage = v
		}
		return true
	})
	c, ok := readUsage(usage, data)
	if !ok {
		return false
	}
	s.openai, s.haveOpenAI = c, true
	if s.strip && choices == 0 {
		if off, _ := checkSyntax(data); off < 0 {
			s.stripped++
			return true
		}
	}
	return false
}

// choiceText counts one streamed choice's text.
func (s *StreamScanner) choiceText(ch jv.Value) {
	ch.ForEach(func(k, v jv.Value) bool {
		switch k.Str {
		case "text": // completions
			s.addText(v)
		case "delta": // chat
			v.ForEach(func(k, f jv.Value) bool {
				switch k.Str {
				case "content", "refusal":
					s.addText(f)
				case "tool_calls":
					f.ForEach(func(_, call jv.Value) bool {
						s.addText(call.Get("function.arguments"))
						return true
					})
				}
				return true
			})
		}
		return true
	})
}

// responsesEvent reads one responses API event.
func (s *StreamScanner) responsesEvent(data []byte) {
	root := jv.Parse(view(data))
	if !root.IsObject() {
		return
	}
	var typ, delta, resp jv.Value
	root.ForEach(func(k, v jv.Value) bool {
		switch k.Str {
		case "type":
			typ = v
		case "delta":
			delta = v
		case "response":
			resp = v
		}
		return true
	})
	switch typ.Str {
	case "response.output_text.delta", "response.refusal.delta", "response.function_call_arguments.delta":
		s.addText(delta)
	}
	var usage jv.Value
	resp.ForEach(func(k, v jv.Value) bool {
		switch k.Str {
		case "model":
			s.setModel(v)
		case "usage":
			usage = v
			if c, ok := readCounts(v); ok {
				s.openai, s.haveOpenAI = c, true
			}
		}
		return true
	})
	if !usage.Exists() && (!resp.Exists() || !resp.Complete()) && jsontok.Valid(data, jsontok.GJSON).Code != jsontok.ErrNone {
		if c, ok := lastUsage(data); ok { // broken before its usage member
			s.openai, s.haveOpenAI = c, true
		}
	}
}

// anthropicEvent reads one Anthropic messages event.
func (s *StreamScanner) anthropicEvent(data []byte) {
	root := jv.Parse(view(data))
	if !root.IsObject() {
		return
	}
	var typ, message, delta, usage jv.Value
	root.ForEach(func(k, v jv.Value) bool {
		switch k.Str {
		case "type":
			typ = v
		case "message":
			message = v
		case "delta":
			delta = v
		case "usage":
			usage = v
		}
		return true
	})
	switch typ.Str {
	case "message_start":
		message.ForEach(func(k, v jv.Value) bool {
			switch k.Str {
			case "model":
				s.setModel(v)
			case "usage":
				if c, ok := readCounts(v); ok {
					// message_start's output_tokens is a placeholder; the
					// count arrives in message_delta.
					c.out, c.has = 0, c.has&^hasOut
					s.anthropic.merge(c)
				}
			}
			return true
		})
	case "message_delta":
		if c, ok := readCounts(usage); ok {
			s.anthropic.merge(c)
		}
	case "content_block_delta":
		delta.ForEach(func(k, v jv.Value) bool {
			switch k.Str {
			case "text", "partial_json", "thinking":
				s.addText(v)
			}
			return true
		})
	}
}

// degraded reads what it can of an oversized event: the last usage object
// in its tail, for the OpenAI shapes.
func (s *StreamScanner) degraded() {
	if s.ep != ChatCompletions && s.ep != Completions && s.ep != Responses {
		return
	}
	if c, ok := lastUsage(s.lastTail()); ok {
		s.openai, s.haveOpenAI = c, true
	}
}

// lastUsage reads the last usage object in b that is valid JSON with the
// counts readCounts wants: the reading of what is not one valid document
// (an event too large to hold, of which only the tail is kept; an answer
// or event broken before its usage member), where the members cannot be
// told apart by their place.
func lastUsage(b []byte) (counts, bool) {
	const key = `"usage":`
	t := b
	for {
		i := bytes.LastIndex(t, []byte(key))
		if i < 0 {
			return counts{}, false
		}
		j := i + len(key)
		for j < len(b) && jsontok.IsSpace(b[j]) {
			j++
		}
		if end := objectEnd(b[j:]); end > 0 {
			if c, ok := readCounts(jv.Parse(view(b[j : j+end]))); ok {
				return c, true
			}
		}
		t = t[:i]
	}
}

// objectEnd returns the length of the JSON object that b starts with, or
// -1 when b does not start with one that ends within b.
func objectEnd(b []byte) int {
	if len(b) == 0 || b[0] != '{' {
		return -1
	}
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

func (s *StreamScanner) addText(v jv.Value) {
	s.textBytes = addSat(s.textBytes, textLen(v))
}

func (s *StreamScanner) setModel(v jv.Value) {
	if s.model == "" && v.Type == jv.String && v.Str != "" {
		s.model = strings.Clone(v.Str)
	}
}

// Model is the model the stream says it served ("" when none was seen).
func (s *StreamScanner) Model() string { return s.model }

// Usage is the stream's usage so far. What the provider reported is used
// as is (see ParseUsage for the mapping). What it did not report is
// estimated and flagged: the output as EstimateTokens(streamed text bytes),
// the input as EstimateTokens of SetPromptBytes' value (0 if never set);
// Total is then Input + Output.
func (s *StreamScanner) Usage() (ledger.Usage, ledger.Estimated) {
	if s.ep != Messages {
		if s.haveOpenAI {
			return s.openai.usage(s.ep), ledger.Estimated{}
		}
		in, out := EstimateTokens(s.promptBytes), EstimateTokens(s.textBytes)
		return ledger.Usage{Input: in, Output: out, Total: addSat(in, out)}, ledger.Estimated{Input: true, Output: true}
	}
	c := s.anthropic
	var est ledger.Estimated
	if c.has&(hasIn|hasCacheRead|hasCacheCreation) == 0 {
		c.in, est.Input = EstimateTokens(s.promptBytes), true
	}
	if c.has&hasOut == 0 {
		c.out, est.Output = EstimateTokens(s.textBytes), true
	}
	return c.usage(Messages), est
}

// Stripped is how many usage-only chunks the scanner removed.
func (s *StreamScanner) Stripped() int { return s.stripped }
