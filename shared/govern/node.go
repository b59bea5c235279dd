package govern

import (
	"fmt"
	"strings"

	"github.com/tokentriage/tokentriage/shared/vkey"
)

// Node ids (seed 004): one or more <kind>:<id> segments joined by "/". The
// kind is lowercase letters; the id is lowercase letters, digits, "-" and
// "_". Uppercase, spaces, empty segments and ".." are out of charset. Config
// nodes are org:<o>, org:<o>/team:<t> and org:<o>/team:<t>/user:<u>;
// __global is the synthetic root and not a node id.

// Levels a template may attach at. A key-level template has one instance
// per virtual key: at the key leaf of its chain, <owner>/key:<kid>.
const (
	LevelOrg  = "org"
	LevelTeam = "team"
	LevelUser = "user"
	LevelKey  = "key"
)

// KeyLeaf is the node of a virtual key, first in its chain (seed 004):
// <owner>/key:<kid>.
func KeyLeaf(owner, kid string) string { return owner + "/key:" + kid }

// SplitKeyLeaf splits a key leaf into its owner and kid; ok is false for
// a node that is not one (the last segment is not key:<kid>). It does not
// validate either half (ValidKeyLeaf does).
func SplitKeyLeaf(node string) (owner, kid string, ok bool) {
	i := strings.LastIndexByte(node, '/')
	if i <= 0 || !strings.HasPrefix(node[i+1:], "key:") {
		return "", "", false
	}
	return node[:i], node[i+len("/key:"):], true
}

// ValidKeyLeaf reports whether s is a key leaf: a valid owner node id, then
// key: and a kid (vk_ and 12 letters or digits: the one segment whose id
// may hold capitals, as a kid does).
func ValidKeyLeaf(s string) error {
	owner, kid, ok := SplitKeyLeaf(s)
	if !ok {
		return fmt.Errorf("%q is not a key's node (write <owner node>/key:<kid>, e.g. org:acme/team:ml/user:dev1/key:vk_FEKZdMs2UQRi)", s)
	}
	if err := ValidNodeID(owner); err != nil {
		return fmt.Errorf("key node %q: owner: %w", s, err)
	}
	if !vkey.ValidKID(kid) {
		return fmt.Errorf("key node %q: %q is not a kid (vk_ followed by 12 letters and digits)", s, kid)
	}
	return nil
}

// MaxNodeIDBytes bounds a node id: it is written into every counter
// identity, ledger row and key of the node.
const MaxNodeIDBytes = 512

// ValidNodeID reports whether s is a node id of seed 004's grammar, at most
// MaxNodeIDBytes long. The error names the offending segment and says what
// the charset is.
func ValidNodeID(s string) error {
	if s == "" {
		return fmt.Errorf("node id is empty (write <kind>:<id> segments joined by /, e.g. org:acme/team:ml)")
	}
	if s == Global {
		return fmt.Errorf("node id %q is the synthetic root, not a node (it cannot be declared, created or own a key)", s)
	}
	if len(s) > MaxNodeIDBytes {
		return fmt.Errorf("node id %q… is %d bytes long; a node id has at most %d (it is part of every counter, ledger row and key of the node)", s[:32], len(s), MaxNodeIDBytes)
	}
	rest := s
	for {
		seg, tail, more := strings.Cut(rest, "/")
		if err := validSegment(seg); err != nil {
			return fmt.Errorf("node id %q: %w", s, err)
		}
		if !more {
			return nil
		}
		rest = tail
	}
}

func validSegment(seg string) error {
	if seg == "" {
		return fmt.Errorf("empty segment (segments are <kind>:<id> joined by a single /)")
	}
	if seg == ".." || seg == "." {
		return fmt.Errorf("segment %q is not allowed", seg)
	}
	kind, id, ok := strings.Cut(seg, ":")
	if !ok {
		return fmt.Errorf("segment %q is not <kind>:<id>", seg)
	}
	if kind == "" {
		return fmt.Errorf("segment %q has an empty kind", seg)
	}
	for i := 0; i < len(kind); i++ {
		if c := kind[i]; c < 'a' || c > 'z' {
			return fmt.Errorf("segment %q: kind %q is out of charset (lowercase letters)", seg, kind)
		}
	}
	if err := validIDPart(id); err != nil {
		return fmt.Errorf("segment %q: %w", seg, err)
	}
	return nil
}

// validIDPart checks the id half of a segment: lowercase letters, digits,
// "-" and "_".
func validIDPart(id string) error {
	if id == "" {
		return fmt.Errorf("id is empty")
	}
	for i := 0; i < len(id); i++ {
		if !idChar(id[i]) {
			return fmt.Errorf("id %q is out of charset (lowercase letters, digits, - and _)", id)
		}
	}
	return nil
}

func idChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// NodeLevel returns the kind of a node's last segment ("org", "team",
// "user", "key"), or "global" for __global. It does not validate the id.
func NodeLevel(node string) string {
	if node == Global {
		return "global"
	}
	last := node[strings.LastIndexByte(node, '/')+1:]
	kind, _, _ := strings.Cut(last, ":")
	return kind
}

// NodeDepth is the number of segments of a node id: 0 for __global, 1 for
// org:acme, 3 for org:acme/team:ml/user:dev1, 4 for a key leaf under it.
func NodeDepth(node string) int {
	if node == Global || node == "" {
		return 0
	}
	return strings.Count(node, "/") + 1
}

// Chain returns the resolution chain of a key (seed 004): the key leaf
// <owner>/key:<kid>, the owner's prefixes deepest first, then __global. An
// anonymous request (owner "") has the chain [__global]; with kid "" there
// is no key leaf.
func Chain(owner, kid string) []string {
	return AppendChain(make([]string, 0, NodeDepth(owner)+2), owner, kid)
}

// AppendChain appends the chain of (owner, kid) to buf (see Chain). The
// prefixes are substrings of owner; only the key leaf allocates, so a caller
// that resolves many requests of one key keeps the chain with the key.
func AppendChain(buf []string, owner, kid string) []string {
	if owner != "" && owner != Global {
		if kid != "" {
			buf = append(buf, owner+"/key:"+kid)
		}
		end := len(owner)
		for {
			buf = append(buf, owner[:end])
			i := strings.LastIndexByte(owner[:end], '/')
			if i < 0 {
				break
			}
			end = i
		}
	}
	return append(buf, Global)
}
