package jsontok

// Kind is what a token is.
type Kind uint8

const (
	End         Kind = iota // the document ended: its value, then only space
	Err                     // the document broke the grammar: Tokenizer.Err
	ObjectStart             // {
	ObjectEnd               // }
	ArrayStart              // [
	ArrayEnd                // ]
	Key                     // an object member's name; its ':' is read with it
	String
	Number
	True
	False
	Null
)

// Token is one token of a document: what it is and its bytes, src[Start:End]
// (a String or Key with its quotes, a bracket its one byte; End and Err
// are empty, where reading stopped).
type Token struct {
	Kind Kind
	// Depth is how deep the token stands: 0 for the top-level value
	// (and its brackets), 1 for what is directly inside it. A container's
	// opening and closing brackets stand at the same depth. End and Err
	// stand at depth 0.
	Depth int32
	// Shrink is, for a String or Key, how many bytes fewer its decoded
	// text has than the bytes between its quotes: it holds an escape
	// exactly when Shrink > 0. Not set for other kinds.
	Shrink     int32
	Start, End int
}

// Escaped reports whether a String or Key holds an escape.
func (k *Token) Escaped() bool { return k.Shrink > 0 }

// DecodedLen is the byte length of a String or Key once decoded (escapes
// resolved as AppendText resolves them, other bytes as they are).
func (k *Token) DecodedLen() int { return k.End - k.Start - 2 - int(k.Shrink) }

// Rules are what readers of JSON differ in.
type Rules struct {
	// MaxDepth is the deepest nesting of arrays and objects read; a
	// deeper document is an ErrDepth. 0 means DefaultMaxDepth; at most
	// 16,384.
	MaxDepth int
	// UTF8 makes a string that is not valid UTF-8 a fault (ErrUTF8), as
	// RFC 8259 requires of a document exchanged between systems; without
	// it a string may hold any byte from 0x20 up, as gjson and
	// encoding/json read it.
	UTF8 bool
}

// DefaultMaxDepth is the nesting the readers of request bodies, answers,
// events and ledger rows allow: far more than real documents nest (tool
// schemas nest a few dozen levels).
const DefaultMaxDepth = 512

// maxDepthBound is the deepest nesting any Rules may allow (a larger
// MaxDepth is this): the size of the Tokenizer's bit stack, a power of two.
const maxDepthBound = 1 << 14

// The rules of the project's readers.
var (
	// GJSON is the grammar of gjson.ValidBytes, bounded: shared/llm reads
	// what gjson reads, so the filter agrees with the gjson readings that
	// word its errors.
	GJSON = Rules{MaxDepth: DefaultMaxDepth}
	// Strict is RFC 8259 with its UTF-8 requirement: the ledger's rows.
	Strict = Rules{MaxDepth: DefaultMaxDepth, UTF8: true}
	// EncodingJSON is what encoding/json accepts, to its depth bound:
	// configuration documents.
	EncodingJSON = Rules{MaxDepth: 10000}
)

// Tokenizer reads a JSON document token by token, checking the grammar as
// it goes: a document whose tokens all came out before End is valid; a
// fault stops it at an Err token (Err has the Error), and it then hands
// out nothing else. Commas and colons are not tokens (a member's colon is
// read with its Key; a missing one is a fault handed out after the Key).
//
//	var t jsontok.Tokenizer
//	t.Reset(doc, jsontok.GJSON)
//	for {
//		tok := t.Next()
//		switch tok.Kind {
//		case jsontok.End: ...
//		case jsontok.Err: return t.Err()
//		}
//	}
//
// Next hands tokens out of a buffer the Tokenizer fills many at a time,
// and is inlined where it is called: in the filter's wasm a call costs as
// much as the work of a small token, so a reader pays one call per
// buffer, not one per token. A token Next returned is good until Next is
// called again; copy what is kept.
//
// The Tokenizer holds its buffer and its bit stack (whether each open
// container is an object), about 3 KiB: hold one where documents are read
// often rather than declaring one per document. The zero Tokenizer reads
// an empty document.
type Tokenizer struct {
	src    []byte
	pos    int // where read goes on
	state  uint8
	single bool // End just past the first value (ResetAt)
	depth  int
	rules  Rules
	err    Error
	bi, bn int // buf[bi:bn] are the tokens read and not yet handed out
	buf    [16]Token
	// Bit d of stack: the container at depth d is an object. It is
	// sized for every rule set's bound and indexed under a mask, so that
	// the loop reaches it without a bounds check or a branch (each cost
	// more, in the guest, than the 2 KiB it takes).
	stack [maxDepthBound / 64]uint64
}

const (
	sValue = iota // a value must start (or, in an empty array, a ']')
	sAfter        // a value just ended
	sKey          // a member's name must start
	sClose        // the next byte closes the innermost container
	sColon        // a member's name was not followed by its ':'
	sEnd
	sErr
)

// Reset readies t to read the document src under rules r.
func (t *Tokenizer) Reset(src []byte, r Rules) {
	t.ResetAt(src, 0, r)
	t.single = false
}

// ResetAt readies t to read the one value that starts at src[i] (after
// space), and to end (End) just past it whatever follows.
func (t *Tokenizer) ResetAt(src []byte, i int, r Rules) {
	if r.MaxDepth <= 0 {
		r.MaxDepth = DefaultMaxDepth
	}
	r.MaxDepth = min(r.MaxDepth, maxDepthBound)
	t.src, t.pos, t.state, t.single, t.depth, t.rules = src, i, sValue, true, 0, r
	t.err.Code, t.bi, t.bn = ErrNone, 0, 0 // the rest of err is set with its Code
}

// Next hands out the next token.
func (t *Tokenizer) Next() *Token {
	if t.bi == t.bn {
		t.fill()
	}
	t.bi++
	return &t.buf[t.bi-1]
}

// Batch hands out every token read and not yet handed out, reading more
// when there are none: at least one, the last of a document End or Err.
// It is Next for a reader that walks tokens in a loop of its own; the
// slice is good until the next call of Batch or Next.
func (t *Tokenizer) Batch() []Token {
	if t.bi == t.bn {
		t.fill()
	}
	toks := t.buf[t.bi:t.bn]
	t.bi = t.bn
	return toks
}

// fill reads the next tokens into the buffer. It is not inlined, so that
// Next is.
//
//go:noinline
func (t *Tokenizer) fill() {
	t.bn = t.read(t.buf[:], false)
	t.bi = 0
}

// Err is the fault that stopped t; its Code is ErrNone while there is none.
func (t *Tokenizer) Err() Error {
	if t.err.Code == ErrNone {
		return Error{}
	}
	return t.err
}

// SkipValue reads the whole value that starts next (after a Key, at the
// start, or where an array element may start) and returns its first
// token with the span of the whole value: an object from its '{' to its
// '}'. It returns an Err token on a fault inside it, and an ObjectEnd or
// ArrayEnd when the container closes instead (no value there).
func (t *Tokenizer) SkipValue() Token {
	first := *t.Next()
	if first.Kind != ObjectStart && first.Kind != ArrayStart {
		return first
	}
	end := t.closeAt(first.Depth)
	if end.Kind == Err {
		return end
	}
	first.End = end.End
	return first
}

// SkipRest reads the rest of the innermost open container, its close
// included, and returns that closing token (an Err token on a fault): for
// a reader that has read what it wanted from an object or array. Before
// any token was handed out it is SkipValue.
func (t *Tokenizer) SkipRest() Token {
	if t.bi == 0 {
		return t.SkipValue()
	}
	last := t.buf[t.bi-1]
	switch last.Kind {
	case ObjectStart, ArrayStart:
		return t.closeAt(last.Depth)
	case End, Err:
		return last
	}
	return t.closeAt(last.Depth - 1)
}

// closeAt hands out tokens up to the close at depth d, and returns it (or
// the Err that came first).
func (t *Tokenizer) closeAt(d int32) Token {
	for {
		tok := t.Next()
		switch tok.Kind {
		case ObjectEnd, ArrayEnd:
			if tok.Depth == d {
				return *tok
			}
		case Err, End:
			return *tok
		}
	}
}

func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// read reads the next tokens into buf, up to len(buf) of them, and
// returns how many it read; the document's last is End or Err. With all
// it reads to the end or a fault, every token over buf[0] (Valid).
//
// Its shape is the one the filter's wasm runs fastest, found by measuring:
// three main states in one loop, few variables live across it, no call
// on the way from one token to the next but for a string (ScanString) or
// a number (ScanNumber), the bit stack indexed under a mask.
func (t *Tokenizer) read(buf []Token, all bool) int {
	b := t.src
	n := len(b)
	i := t.pos
	depth := t.depth
	state := int(t.state)
	k := 0
	for {
		if k == len(buf) {
			if !all {
				break
			}
			k = 0 // checking: every token over buf[0]
		}
		for i < n && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
			i++
		}
		switch state {
		case sValue:
			if i == n {
				return t.stop(buf, k, ErrValue, i, i)
			}
			tok := &buf[k]
			k++
			switch c := b[i]; c {
			case '{', '[':
				if depth >= t.rules.MaxDepth {
					return t.stop(buf, k-1, ErrDepth, i, i)
				}
				d := depth & (maxDepthBound - 1)
				if c == '{' {
					t.stack[d/64] |= 1 << (d % 64)
					tok.Kind = ObjectStart
				} else {
					t.stack[d/64] &^= 1 << (d % 64)
					tok.Kind = ArrayStart
				}
				tok.Start, tok.End, tok.Depth = i, i+1, int32(depth)
				depth++
				i++
				for i < n && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
					i++
				}
				if i < n && (b[i] == '}' && c == '{' || b[i] == ']' && c == '[') {
					state = sClose
				} else if c == '{' {
					state = sKey
				}
			case '"':
				end, shrink, code := ScanString(b, i, t.rules.UTF8)
				if code != 0 {
					return t.stop(buf, k-1, code, end, i)
				}
				tok.Kind, tok.Start, tok.End, tok.Shrink, tok.Depth = String, i, end, int32(shrink), int32(depth)
				i = end
				state = sAfter
			case 't', 'f', 'n':
				lit, kind := "null", Null
				if c == 't' {
					lit, kind = "true", True
				} else if c == 'f' {
					lit, kind = "false", False
				}
				if !hasLiteral(b, i, lit) {
					return t.stop(buf, k-1, ErrLiteral, i, i)
				}
				tok.Kind, tok.Start, tok.End, tok.Depth = kind, i, i+len(lit), int32(depth)
				i += len(lit)
				state = sAfter
			default:
				if c != '-' && (c < '0' || c > '9') {
					return t.stop(buf, k-1, ErrValue, i, i)
				}
				end, code := ScanNumber(b, i)
				if code != 0 {
					return t.stop(buf, k-1, code, end, i)
				}
				tok.Kind, tok.Start, tok.End, tok.Depth = Number, i, end, int32(depth)
				i = end
				state = sAfter
			}
		case sKey:
			if i == n || b[i] != '"' {
				return t.stop(buf, k, ErrKey, i, i)
			}
			end, shrink, code := ScanString(b, i, t.rules.UTF8)
			if code != 0 {
				return t.stop(buf, k, code, end, i)
			}
			tok := &buf[k]
			k++
			tok.Kind, tok.Start, tok.End, tok.Shrink, tok.Depth = Key, i, end, int32(shrink), int32(depth)
			i = end
			for i < n && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
				i++
			}
			if i == n || b[i] != ':' {
				state = sColon // the fault, after the name is handed out
				continue
			}
			i++
			state = sValue
		case sAfter:
			if depth == 0 {
				return t.stopEnd(buf, k, i)
			}
			d := (depth - 1) & (maxDepthBound - 1)
			obj := t.stack[d/64]&(1<<(d%64)) != 0
			closer := byte(']')
			if obj {
				closer = '}'
			}
			if i == n {
				return t.stop(buf, k, afterError(obj), i, i)
			}
			switch b[i] {
			case ',':
				i++
				if obj {
					state = sKey
				} else {
					state = sValue
				}
				continue
			case closer:
			default:
				return t.stop(buf, k, afterError(obj), i, i)
			}
			fallthrough
		case sClose: // the bracket at i closes the innermost container
			tok := &buf[k]
			k++
			depth--
			tok.Kind, tok.Start, tok.End, tok.Depth = ArrayEnd, i, i+1, int32(depth)
			if b[i] == '}' {
				tok.Kind = ObjectEnd
			}
			i++
			state = sAfter
		case sColon:
			return t.stop(buf, k, ErrColon, i, i)
		default: // sEnd, sErr
			return t.stopEnd(buf, k, i)
		}
	}
	t.pos, t.state, t.depth = i, uint8(state), depth
	return k
}

// stop stops t at a fault at off, in the token that starts at start (for
// a broken literal, at its first byte that differs): it sets the Error
// and writes an Err token at buf[k], and returns how many tokens buf then
// holds.
//
// It is never inlined: its Error would widen read's frame, which the wasm
// build clears on every call.
//
//go:noinline
func (t *Tokenizer) stop(buf []Token, k int, c Code, off, start int) int {
	if c == ErrLiteral {
		_, off = ScanLiteral(t.src, start)
	}
	e := Error{Code: c, Off: off, Start: start, EOF: off >= len(t.src)}
	if !e.EOF {
		e.Byte = t.src[off]
	}
	switch c {
	case ErrDepth:
		e.Depth = t.rules.MaxDepth
	case ErrLiteral:
		e.Literal = "null"
		switch t.src[start] {
		case 't':
			e.Literal = "true"
		case 'f':
			e.Literal = "false"
		}
	}
	t.err, t.state, t.pos = e, sErr, off
	buf[k] = Token{Kind: Err, Start: off, End: off}
	return k + 1
}

// afterError is the fault of a byte that cannot follow a value in an
// object (obj) or an array.
func afterError(obj bool) Code {
	if obj {
		return ErrMember
	}
	return ErrElement
}

// stopEnd writes at buf[k] the token after the top-level value, whose
// search stopped at i: End, where the value ended (ResetAt) or at the end
// of the input, or an Err for anything after the value; and again the
// End or Err that ended the document when called after it.
//
//go:noinline
func (t *Tokenizer) stopEnd(buf []Token, k, i int) int {
	b := t.src
	switch {
	case t.state == sErr:
		buf[k] = Token{Kind: Err, Start: t.err.Off, End: t.err.Off}
		return k + 1
	case t.state == sEnd:
	case t.single:
		for i > 0 && (b[i-1] == ' ' || b[i-1] == '\n' || b[i-1] == '\r' || b[i-1] == '\t') {
			i-- // back to where the value ended
		}
	case i != len(b):
		return t.stop(buf, k, ErrTrailing, i, i)
	}
	t.state, t.pos, t.depth = sEnd, i, 0
	buf[k] = Token{Kind: End, Start: i, End: i}
	return k + 1
}

// Skip reads the one value that starts at b[i] (after space) under rules
// r, and returns the offset just past it; on a fault, the Error (Code not
// ErrNone) and its offset.
func Skip(b []byte, i int, r Rules) (int, Error) {
	var t Tokenizer
	t.ResetAt(b, i, r)
	if tok := t.SkipValue(); tok.Kind == Err {
		return t.err.Off, t.err
	} else {
		return tok.End, Error{}
	}
}

// Valid checks that b is one JSON document under rules r; the Error's
// Code is ErrNone when it is.
func Valid(b []byte, r Rules) Error {
	var t Tokenizer
	t.Reset(b, r)
	if t.read(t.buf[:1], true); t.buf[0].Kind == Err {
		return t.err
	}
	return Error{}
}
