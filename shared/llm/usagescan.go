package llm

import (
	"bytes"

	"github.com/tokentriage/tokentriage/shared/jsontok/jv"

	"github.com/tokentriage/tokentriage/shared/jsontok"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// UsageScanner reads the usage of a JSON answer fed to it in chunks,
// keeping only the top level's "usage" and "model" members: an answer of
// any size is read in constant memory. The usage of a chat completion, a
// message or a response is its last member, after the whole generated
// text, so an answer too large to copy (past the filter's copy cap) is
// still settled on what the provider reported. See
// RATIONALE.md#why-is-a-large-answer-scanned-for-its-usage.
//
// It skips every other member's value by its brackets and strings, and
// reads what it kept with ParseUsage, so the two agree on what a usage
// object is. A top-level name spelt with escapes is decoded before it is
// compared; the last of repeated members wins, as in ParseUsage.
type UsageScanner struct {
	state  uint8
	depth  int  // open brackets inside the current member's value
	inStr  bool // inside a string of the current value (or the key)
	esc    bool // the previous byte was a backslash inside a string
	keep   uint8
	key    []byte // the current member's name, raw, at most maxScanKey bytes
	keyBig bool   // the name outgrew key
	val    []byte // the current kept member's value
	valBig bool   // the value outgrew maxScanValue
	usage  []byte // the last "usage" member's value
	model  []byte // the last "model" member's value
}

const (
	usWant  uint8 = iota // before the opening brace
	usKey                // a member name (or the closing brace) must start
	usInKey              // inside a member name
	usColon              // after a name
	usValue              // a value must start
	usInVal              // inside a value
	usAfter              // after a value: ',' or '}'
	usDone               // the closing brace was read
	usBad                // not a JSON object the scanner can follow
)

const (
	keepNone uint8 = iota
	keepUsage
	keepModel
)

// maxScanKey bounds a kept member name: "usage" spelt entirely with
// \u escapes is 30 bytes. maxScanValue bounds a kept value: a usage
// object is a few hundred bytes; one past 64 KiB is not read.
const (
	maxScanKey   = 64
	maxScanValue = 64 << 10
)

// Reset readies the scanner for another answer, keeping its buffers.
func (u *UsageScanner) Reset() {
	*u = UsageScanner{key: u.key[:0], val: u.val[:0], usage: u.usage[:0], model: u.model[:0]}
}

// Feed scans the next chunk of the answer.
func (u *UsageScanner) Feed(b []byte) {
	for i := 0; i < len(b); {
		switch u.state {
		case usDone, usBad:
			return
		case usWant, usKey, usColon, usValue, usAfter:
			c := b[i]
			i++
			if jsontok.IsSpace(c) {
				continue
			}
			u.structural(c)
		case usInKey:
			i = u.inKey(b, i)
		case usInVal:
			i = u.inValue(b, i)
		}
	}
}

// structural handles c, not a space, between tokens.
func (u *UsageScanner) structural(c byte) {
	switch u.state {
	case usWant:
		if c != '{' {
			u.state = usBad
			return
		}
		u.state = usKey
	case usKey:
		switch c {
		case '"':
			u.key, u.keyBig, u.esc = u.key[:0], false, false
			u.state = usInKey
		case '}':
			u.state = usDone
		default:
			u.state = usBad
		}
	case usColon:
		if c != ':' {
			u.state = usBad
			return
		}
		u.keep = keepOf(u.key, u.keyBig)
		u.state = usValue
	case usValue:
		u.val, u.valBig = u.val[:0], false
		u.depth, u.inStr, u.esc = 0, false, false
		u.state = usInVal
		switch c {
		case '{', '[':
			u.depth = 1
		case '"':
			u.inStr = true
		case ',', '}', ']', ':':
			u.state = usBad
			return
		}
		if u.keep != keepNone {
			u.val = append(u.val, c)
		}
	case usAfter:
		switch c {
		case ',':
			u.state = usKey
		case '}':
			u.state = usDone
		default:
			u.state = usBad
		}
	}
}

// inKey reads a member name from b[i:] and returns where it stopped.
func (u *UsageScanner) inKey(b []byte, i int) int {
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case u.esc:
			u.esc = false
		case c == '\\':
			u.esc = true
		case c == '"':
			u.state = usColon
			return i + 1
		}
		if len(u.key) < maxScanKey {
			u.key = append(u.key, c)
		} else {
			u.keyBig = true
		}
	}
	return i
}

// inValue skips (and, for a kept member, copies) a value from b[i:] and
// returns where it stopped.
func (u *UsageScanner) inValue(b []byte, i int) int {
	start := i
	for i < len(b) {
		if u.inStr {
			if u.esc {
				u.esc = false
				i++
				continue
			}
			j := bytes.IndexAny(b[i:], "\"\\")
			if j < 0 {
				i = len(b)
				break
			}
			i += j
			if b[i] == '\\' {
				u.esc = true
			} else {
				u.inStr = false
				if u.depth == 0 {
					i++
					u.end(b[start:i])
					return i
				}
			}
			i++
			continue
		}
		c := b[i]
		switch {
		case c == '"':
			u.inStr = true
		case c == '{' || c == '[':
			u.depth++
		case c == '}' || c == ']':
			if u.depth == 0 {
				// A scalar ends at its object's close.
				u.end(b[start:i])
				return i
			}
			u.depth--
			if u.depth == 0 {
				i++
				u.end(b[start:i])
				return i
			}
		case u.depth == 0 && (c == ',' || jsontok.IsSpace(c)):
			u.end(b[start:i])
			return i
		}
		i++
	}
	u.keepBytes(b[start:i])
	return i
}

// keepBytes copies p, the next bytes of the current value, when its
// member is kept.
func (u *UsageScanner) keepBytes(p []byte) {
	if u.keep == keepNone || u.valBig {
		return
	}
	if len(u.val)+len(p) > maxScanValue {
		u.valBig, u.val = true, u.val[:0]
	} else {
		u.val = append(u.val, p...)
	}
}

// end takes p, the last bytes of the current value, and files it.
func (u *UsageScanner) end(p []byte) {
	u.keepBytes(p)
	u.state = usAfter
	u.done()
}

// done files the value of a kept member that just ended.
func (u *UsageScanner) done() {
	switch u.keep {
	case keepUsage:
		u.usage = append(u.usage[:0], u.val...)
		if u.valBig {
			u.usage = u.usage[:0]
		}
	case keepModel:
		u.model = append(u.model[:0], u.val...)
		if u.valBig {
			u.model = u.model[:0]
		}
	}
	u.keep = keepNone
}

// keepOf says whether the member named by the raw name key is kept.
func keepOf(key []byte, big bool) uint8 {
	if big {
		return keepNone
	}
	name := key
	if bytes.IndexByte(key, '\\') >= 0 {
		name = []byte(jv.Parse(`"` + string(key) + `"`).Str)
	}
	switch string(name) {
	case "usage":
		return keepUsage
	case "model":
		return keepModel
	}
	return keepNone
}

// Usage reads what the scanner kept as ParseUsage reads a whole answer of
// the endpoint at path: ok is false unless the answer was one JSON object
// whose last "usage" member held token counts.
func (u *UsageScanner) Usage(path string) (ledger.Usage, string, bool) {
	if u.state != usDone || len(u.usage) == 0 {
		return ledger.Usage{}, "", false
	}
	doc := make([]byte, 0, len(u.usage)+len(u.model)+20)
	doc = append(doc, `{"usage":`...)
	doc = append(doc, u.usage...)
	if len(u.model) > 0 {
		doc = append(doc, `,"model":`...)
		doc = append(doc, u.model...)
	}
	doc = append(doc, '}')
	return ParseUsage(path, doc)
}
