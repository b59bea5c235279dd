package govern

import (
	"sort"
	"strconv"
	"strings"
)

// IDKind is one kind of identifier a caller sends that becomes part of a
// counter identity and a ledger row: a model name, a customer id, a tag.
// Each is bounded in length and charset, so that no request can make a
// counter, a row or a log line of megabytes, or a value that reads as
// another (a "," in a tag, a "*" that is the overflow counter's value).
type IDKind uint8

const (
	ModelID IDKind = iota + 1
	CustomerID
	TagID
)

// MaxTags is the most tags one request may carry.
const MaxTags = 16

// Overflow is the value a per-value dim takes in the identity of a limit's
// overflow counter: the one counter the values past max_distinct share. No
// identifier may hold it ("*" is outside every charset).
const Overflow = "*"

// Name is the kind as a 400 names it.
func (k IDKind) Name() string {
	switch k {
	case ModelID:
		return "model"
	case CustomerID:
		return "customer"
	case TagID:
		return "tag"
	}
	return "identifier"
}

// MaxLen is the longest value of the kind, in bytes.
func (k IDKind) MaxLen() int {
	switch k {
	case ModelID, CustomerID:
		return 256
	case TagID:
		return 64
	}
	return 0
}

// Charset describes the bytes a value of the kind may hold.
func (k IDKind) Charset() string {
	switch k {
	case ModelID:
		return "letters, digits and . _ - : / @ +"
	case CustomerID:
		return "letters, digits and . _ - : / @ + ="
	case TagID:
		return "letters, digits and . _ - : /"
	}
	return ""
}

func (k IDKind) allows(c byte) bool {
	if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
		return true
	}
	switch c {
	case '.', '_', '-', ':', '/':
		return true
	case '@', '+':
		return k == ModelID || k == CustomerID
	case '=':
		return k == CustomerID
	}
	return false
}

// firstOutside finds the first byte of s the charset does not allow.
func (k IDKind) firstOutside(s string) (int, bool) {
	for i := 0; i < len(s); i++ {
		if !k.allows(s[i]) {
			return i, true
		}
	}
	return 0, false
}

func (k IDKind) charsetProblem(s string, at int) string {
	return "holds " + quoteByte(s[at]) + " at byte " + strconv.Itoa(at) + ", outside the charset of a " + k.Name() + " (" + k.Charset() + ")"
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f && c != '\'' {
		return "'" + string(c) + "'"
	}
	return "byte 0x" + strconv.FormatUint(uint64(c), 16)
}

// Check reports what is wrong with value as an identifier of kind k, or
// "": empty, longer than MaxLen (the text names its length, not its
// bytes), or holding a byte outside the charset. The text is the message
// of the 400 that refuses it.
func (k IDKind) Check(value string) string {
	switch {
	case value == "":
		return k.Name() + " is empty"
	case len(value) > k.MaxLen():
		return k.Name() + " " + strconv.Quote(clip(value, 40)) + " is " + strconv.Itoa(len(value)) + " bytes, over the " + strconv.Itoa(k.MaxLen()) + "-byte bound of a " + k.Name()
	}
	if at, bad := k.firstOutside(value); bad {
		return k.Name() + " " + strconv.Quote(clip(value, 40)) + " " + k.charsetProblem(value, at)
	}
	return ""
}

// clip shortens s for a message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// ParseTags reads a list of tags written as X-Tt-Tags carries it
// ("batch, nightly"): split on commas, spaces around each trimmed, empty
// entries dropped. It returns the tags in JoinTags form, or what is wrong
// with one of them (or with their number).
func ParseTags(s string) (string, string) {
	var tags []string
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if msg := TagID.Check(part); msg != "" {
			return "", msg
		}
		tags = append(tags, part)
	}
	if len(tags) > MaxTags {
		return "", strconv.Itoa(len(tags)) + " tags, over the bound of " + strconv.Itoa(MaxTags) + " tags on one request"
	}
	return JoinTags(tags), ""
}

// JoinTags is the tags' form in Dims.Tags and on a ledger row: sorted,
// each once, joined by ",".
func JoinTags(tags []string) string {
	switch len(tags) {
	case 0:
		return ""
	case 1:
		return tags[0]
	}
	t := append([]string(nil), tags...)
	sort.Strings(t)
	out := t[:1]
	for _, x := range t[1:] {
		if x != out[len(out)-1] {
			out = append(out, x)
		}
	}
	return strings.Join(out, ",")
}

// hasTag reports whether the JoinTags list tags holds tag.
func hasTag(tags, tag string) bool {
	for tags != "" {
		var t string
		t, tags, _ = strings.Cut(tags, ",")
		if t == tag {
			return true
		}
	}
	return false
}
