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
	// Shrink is, for a String or Key, how many bytes fewer its decoded
	// text has than the bytes between its quotes: it holds an escape
	// exactly when Shrink > 0. Not set for other kinds.
	Shrink     int
	Start, End int
}

// Escaped reports whether a String or Key holds an escape.
func (k *Token) Escaped() bool { return k.Shrink > 0 }

// DecodedLen is the byte length of a String or Key once decoded (escapes
// resolved as AppendText resolves them, other bytes as they are).
func (k *Token) DecodedLen() int { return k.End - k.Start - 2 - k.Shrink }

// Rules are what readers of JSON differ in.
type Rules struct {
	// MaxDepth is the deepest nesting of arrays and objects read; a
	// deeper document is an ErrDepth. 0 means DefaultMaxDepth.
	MaxDepth int
	// UTF8 makes a string that is not valid UTF-8 a fault (ErrUTF8), as
	// RFC 8259 requires of a document exchanged between systems; without
	// it a string may hold any byte from 0x20 up, as gjson and
	// encoding/json read it.
	UTF8 bool
}

// DefaultMaxDepth is the nesting the readers of request bodies, answers,
// events and ledger rows allow: far more than real documents nest (tool
// schemas nest a few dozen levels), and a bit stack that fits in the
// Tokenizer.
const DefaultMaxDepth = 512

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
// fault stops it at an Err token, and it then hands out nothing else.
// Commas and colons are not tokens (a member's colon is read with its
// Key; a missing one is a fault handed out after the Key). It has two ways to hand tokens out:
//
//	// One at a time.
//	t.Reset(doc, jsontok.GJSON)
//	for k := t.Next(); k != jsontok.End; k = t.Next() {
//		if k == jsontok.Err { return t.Err() }
//		tok := t.Token()
//	}
//
//	// Many at a time, for hot loops: in the filter's wasm a call costs
//	// as much as the work of a small token, and Read makes one call per
//	// len(buf) tokens.
//	var buf [32]jsontok.Token
//	for {
//		n := t.Read(buf[:])
//		for _, tok := range buf[:n] { ... }
//	}
//
// The bit stack that says whether each open container is an object lives
// in the Tokenizer up to DefaultMaxDepth levels; deeper rules grow it on
// the heap. The zero Tokenizer reads an empty document.
type Tokenizer struct {
	src    []byte
	pos    int // where the next token's search starts
	state  uint8
	single bool // End just past the first value (ResetAt)
	depth  int
	rules  Rules
	last   [1]Token // what Next read
	err    Error
	stack  [DefaultMaxDepth / 64]uint64 // bit d: the container at depth d is an object
	deep   []uint64                     // the same from depth DefaultMaxDepth on
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
	t.src, t.pos, t.state, t.single, t.depth, t.rules = src, i, sValue, true, 0, r
	t.last[0], t.err = Token{Start: i, End: i}, Error{}
	t.deep = t.deep[:0]
}

// Next reads the next token and returns its kind; Token has the rest.
func (t *Tokenizer) Next() Kind {
	t.read(t.last[:], -1)
	return t.last[0].Kind
}

// Token is the token Next read last.
func (t *Tokenizer) Token() *Token { return &t.last[0] }

// Read reads the next tokens into buf, up to len(buf) of them, and returns
// how many it read; the document's last token is End or Err, and Read
// stops after it.
func (t *Tokenizer) Read(buf []Token) int { return t.read(buf, -1) }

// Depth is how many containers are open: 1 inside the top-level object.
func (t *Tokenizer) Depth() int { return t.depth }

// InObject reports whether the innermost open container is an object.
func (t *Tokenizer) InObject() bool { return t.depth > 0 && t.bit(t.depth-1) }

// Pos is where the next token's search starts: just past the last token
// read (and past a comma or colon after it).
func (t *Tokenizer) Pos() int { return t.pos }

// Err is the fault that stopped t; its Code is ErrNone while there is none.
func (t *Tokenizer) Err() Error { return t.err }

func (t *Tokenizer) bit(d int) bool {
	if d < DefaultMaxDepth {
		return t.stack[d/64]&(1<<(d%64)) != 0
	}
	d -= DefaultMaxDepth
	return t.deep[d/64]&(1<<(d%64)) != 0
}

func (t *Tokenizer) setBit(d int, obj bool) {
	var w *uint64
	if d < DefaultMaxDepth {
		w = &t.stack[d/64]
	} else {
		d -= DefaultMaxDepth
		for len(t.deep) <= d/64 {
			t.deep = append(t.deep, 0)
		}
		w = &t.deep[d/64]
	}
	if obj {
		*w |= 1 << (d % 64)
	} else {
		*w &^= 1 << (d % 64)
	}
}

// read is Read, and SkipValue's loop: with stop >= 0 it reads until a
// close brings depth down to stop (or a fault), writing every token over
// buf[0].
//
// It is one loop in the shape the filter's wasm runs fastest: three
// states, an empty container closed where it opens, plain integers and
// literals read in place, every way out but a full buffer a return of its
// own. Each token costs a few stores, and a call only for a string
// (ScanString) or a number with a sign, fraction or exponent.
func (t *Tokenizer) read(buf []Token, stop int) int {
	b := t.src
	n := len(b)
	i := t.pos
	depth := t.depth
	state := int(t.state)
	k := 0
	for {
		if k == len(buf) {
			if stop < 0 {
				break
			}
			k = 0 // skipping: every token over buf[0]
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
				if depth >= DefaultMaxDepth {
					t.setBit(depth, c == '{')
				} else if c == '{' {
					t.stack[depth/64] |= 1 << (depth % 64)
				} else {
					t.stack[depth/64] &^= 1 << (depth % 64)
				}
				depth++
				tok.Kind, tok.Start, tok.End = ArrayStart, i, i+1
				i++
				for i < n && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
					i++
				}
				if c == '{' {
					tok.Kind = ObjectStart
					state = sKey
					if i < n && b[i] == '}' {
						state = sClose
					}
				} else if i < n && b[i] == ']' {
					state = sClose
				}
			case '"':
				end, shrink, c := ScanString(b, i, t.rules.UTF8)
				if c != 0 {
					return t.stop(buf, k-1, c, end, i)
				}
				tok.Kind, tok.Start, tok.End, tok.Shrink = String, i, end, shrink
				i = end
				state = sAfter
			case 't':
				if n-i < 4 || string(b[i:i+4]) != "true" {
					return t.stop(buf, k-1, ErrLiteral, i, i)
				}
				tok.Kind, tok.Start, tok.End = True, i, i+4
				i += 4
				state = sAfter
			case 'f':
				if n-i < 5 || string(b[i:i+5]) != "false" {
					return t.stop(buf, k-1, ErrLiteral, i, i)
				}
				tok.Kind, tok.Start, tok.End = False, i, i+5
				i += 5
				state = sAfter
			case 'n':
				if n-i < 4 || string(b[i:i+4]) != "null" {
					return t.stop(buf, k-1, ErrLiteral, i, i)
				}
				tok.Kind, tok.Start, tok.End = Null, i, i+4
				i += 4
				state = sAfter
			default:
				if c != '-' && (c < '0' || c > '9') {
					return t.stop(buf, k-1, ErrValue, i, i)
				}
				j := i + 1
				for j < n && b[j] >= '0' && b[j] <= '9' {
					j++
				}
				if c == '-' || c == '0' && j > i+1 || j < n && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
					var c Code
					if j, c = ScanNumber(b, i); c != 0 {
						return t.stop(buf, k-1, c, j, i)
					}
				}
				tok.Kind, tok.Start, tok.End = Number, i, j
				i = j
				state = sAfter
			}
		case sKey:
			if i == n || b[i] != '"' {
				return t.stop(buf, k, ErrKey, i, i)
			}
			end, shrink, c := ScanString(b, i, t.rules.UTF8)
			if c != 0 {
				return t.stop(buf, k, c, end, i)
			}
			tok := &buf[k]
			k++
			tok.Kind, tok.Start, tok.End, tok.Shrink = Key, i, end, shrink
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
		case sColon:
			return t.stop(buf, k, ErrColon, i, i)
		case sAfter:
			if depth == 0 {
				return t.stopEnd(buf, k, i)
			}
			d := depth - 1
			obj := false
			if d < DefaultMaxDepth {
				obj = t.stack[d/64]&(1<<(d%64)) != 0
			} else {
				obj = t.bit(d)
			}
			if i == n {
				return t.stop(buf, k, afterError(obj), i, i)
			}
			switch c := b[i]; {
			case c == ',':
				i++
				if obj {
					state = sKey
				} else {
					state = sValue
				}
			case c == '}' && obj, c == ']' && !obj:
				state = sClose
			default:
				return t.stop(buf, k, afterError(obj), i, i)
			}
		case sClose: // the bracket at i closes the innermost container
			tok := &buf[k]
			k++
			depth--
			tok.Kind, tok.Start, tok.End = ArrayEnd, i, i+1
			if b[i] == '}' {
				tok.Kind = ObjectEnd
			}
			i++
			state = sAfter
			if depth == stop {
				t.pos, t.state, t.depth = i, sAfter, depth
				return 1
			}
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

// SkipValue reads the whole value that starts next (after a Key, at the
// start, or where an array element may start) and returns its first
// token, its span the whole value: an object from its '{' to its '}'. It
// returns an Err token on a fault inside it, and an ObjectEnd or ArrayEnd
// when the container closes instead (no value there). The value's tokens
// are read in one call, none handed out.
func (t *Tokenizer) SkipValue() Token {
	var first [1]Token
	t.read(first[:], -1)
	if k := first[0].Kind; k != ObjectStart && k != ArrayStart {
		t.last = first
		return first[0]
	}
	t.read(t.last[:], t.depth-1)
	if last := &t.last[0]; last.Kind != Err {
		last.Kind, last.Start = first[0].Kind, first[0].Start
	}
	return t.last[0]
}

// SkipRest reads the rest of the innermost open container, its close
// included, and returns that closing token (an Err token on a fault): for
// a reader that has read what it wanted from an object or array.
func (t *Tokenizer) SkipRest() Token {
	if t.depth == 0 || t.state == sEnd || t.state == sErr {
		return t.SkipValue()
	}
	t.read(t.last[:], t.depth-1)
	return t.last[0]
}

// Skip reads the one value that starts at b[i] (after space) under rules
// r, and returns the offset just past it; on a fault, the Error (Code not
// ErrNone) and its offset.
func Skip(b []byte, i int, r Rules) (int, Error) {
	var t Tokenizer
	t.ResetAt(b, i, r)
	if tok := t.SkipValue(); tok.Kind == Err {
		return t.err.Off, t.err
	}
	return t.last[0].End, Error{}
}

// Valid checks that b is one JSON document under rules r; the Error's
// Code is ErrNone when it is.
func Valid(b []byte, r Rules) Error {
	var t Tokenizer
	t.Reset(b, r)
	var buf [16]Token
	for {
		n := t.Read(buf[:])
		switch buf[n-1].Kind {
		case End:
			return Error{}
		case Err:
			return t.err
		}
	}
}
