package filter

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/pluginconf"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// keyEntry is one virtual key as a VM knows it: from the plugin
// configuration's static table, or decoded from its record in the key
// table in shared data (the accountant's keys) and kept in the VM's
// bounded cache (lookup.go).
type keyEntry struct {
	kid     string
	sha256  [sha256.Size]byte
	owner   string
	name    string
	scopes  vkey.Scopes
	revoked bool
	// expiresAt: the key stops authenticating at this Unix second (0:
	// never).
	expiresAt int64
	// prev is the hash of the secret before the last rotation, accepted
	// until prevUntil (Unix seconds); hasPrev says there is one.
	prev      [sha256.Size]byte
	hasPrev   bool
	prevUntil int64
	// verified is the last presented key that hashed to sha256 (and
	// verifiedPrev to prev), so a key in steady use costs a constant-time
	// compare instead of a SHA-256.
	verified, verifiedPrev string
	// chain is the key's resolution chain (govern.AppendChain), built at
	// the key's first request and kept with the entry.
	chain []string
	// resolved is what the chain resolved to at gate 1 and gate 2 for
	// the last request of this key (see Engine.resolveGate).
	resolved [2]resolvedChain
	// keeps says the entry is among the engine's resolvedBy.
	keeps bool
}

// resolvedKeys is how many keys keep their resolved instances at once.
// A kept chain is about 2.4 KB with six limits at each gate: all 4,096
// cached keys keeping theirs would hold 10 MB of a VM beside the caches'
// bound; 512 hold 1.2 MB, and a key past them resolves its chain per
// request, as every key once did.
const resolvedKeys = 512

// keepResolved makes k one of the keys that keep their resolved
// instances, dropping those of the key that became one longest ago.
func (e *Engine) keepResolved(k *keyEntry) {
	if k.keeps {
		return
	}
	if old := e.resolvedBy[e.resolvedNext]; old != nil {
		old.resolved, old.keeps = [2]resolvedChain{}, false
	}
	e.resolvedBy[e.resolvedNext], k.keeps = k, true
	e.resolvedNext = (e.resolvedNext + 1) % resolvedKeys
}

// resolvedChain is a chain's instances at one gate for one set of dims,
// valid while the engine's resolveGen and armed plan are the ones it was
// resolved under.
type resolvedChain struct {
	gen   uint64
	armed *govern.Armed
	dims  govern.Dims
	inst  []govern.Instance
}

// staticKeys is the plugin configuration's key table, by kid: it grows
// with the configuration, so every VM holds it. A key the accountant
// syncs with the same kid replaces it (the accountant is the later word).
type staticKeys map[string]*keyEntry

func buildStaticKeys(static []pluginconf.StaticKey) staticKeys {
	t := make(staticKeys, len(static))
	for _, k := range static {
		e := &keyEntry{kid: k.KID, owner: k.Owner, scopes: k.Scopes}
		if b, err := hex.DecodeString(k.SHA256); err == nil && len(b) == sha256.Size {
			copy(e.sha256[:], b)
		} else {
			e.revoked = true // never the case: the configuration is checked at start
		}
		t[k.KID] = e
	}
	return t
}

// authResult is what authentication concluded.
type authResult int

const (
	authAnonymous authResult = iota // no key presented
	authOK
	authMalformed // something presented that is not a virtual key
	authUnknown   // a well-formed key whose kid is unknown or whose secret is wrong
	authRevoked
	authExpired
)

// authenticate checks a presented key. The kid is derived from the key
// itself and looked up (the VM's cache, else the key table in shared data,
// else the static table); the secret is compared by hash in constant
// time: the key's own, or until prevUntil the one it was rotated from.
func (e *Engine) authenticate(key string, now time.Time) (authResult, *keyEntry, string) {
	if key == "" {
		return authAnonymous, nil, ""
	}
	kid, err := vkey.KID(key)
	if err != nil {
		return authMalformed, nil, ""
	}
	k := e.lookupKey(kid)
	if k == nil {
		return authUnknown, nil, kid
	}
	if !k.verify(key, now) {
		return authUnknown, nil, kid
	}
	if k.revoked {
		return authRevoked, k, kid
	}
	if k.expiresAt != 0 && now.Unix() >= k.expiresAt {
		return authExpired, k, kid
	}
	return authOK, k, kid
}

// verify reports whether key is the entry's secret, or its previous one
// while that is still accepted.
func (k *keyEntry) verify(key string, now time.Time) bool {
	if k.verified != "" && subtle.ConstantTimeCompare([]byte(k.verified), []byte(key)) == 1 {
		return true
	}
	if k.hasPrev && k.verifiedPrev != "" && subtle.ConstantTimeCompare([]byte(k.verifiedPrev), []byte(key)) == 1 {
		return now.Unix() < k.prevUntil
	}
	sum := sha256.Sum256([]byte(key))
	if subtle.ConstantTimeCompare(sum[:], k.sha256[:]) == 1 {
		k.verified = key
		return true
	}
	if k.hasPrev && subtle.ConstantTimeCompare(sum[:], k.prev[:]) == 1 {
		k.verifiedPrev = key
		return now.Unix() < k.prevUntil
	}
	return false
}

// chainOf is the key's resolution chain, built at its first use.
func (k *keyEntry) chainOf() []string {
	if k.chain == nil {
		k.chain = govern.AppendChain(nil, k.owner, k.kid)
	}
	return k.chain
}

// A key's record in the key table (its name is the kid):
//
//	u8 keyFormat | u8 flags | [32] sha256 | i64 expires_at
//	[ [32] prev_sha256 | i64 prev_until ]          with keyPrev
//	u16 len, owner | u16 len, name
//	per scope list present (keyModels, keyProviders, keyEndpoints,
//	keyCustomers, in that order): u16 n | n × (u16 len, value)
//
// A list absent is unrestricted; present and empty, it allows nothing.
const (
	keyFormat = 1

	keyRevoked     = 1 << 0
	keyPassthrough = 1 << 1
	keyModels      = 1 << 2
	keyProviders   = 1 << 3
	keyEndpoints   = 1 << 4
	keyPrev        = 1 << 5
	keyCustomers   = 1 << 6
)

// keyProblem says why a synced key cannot be stored ("" when it can): it
// is then left out, so it does not authenticate, rather than kept in a
// form that might allow more than the accountant said.
func keyProblem(k *syncwire.Key) string {
	switch {
	case !vkey.ValidKID(k.KID):
		return "kid " + strconv.Quote(k.KID) + " is not a kid"
	case !hexHash(k.SHA256):
		return "sha256 is not 64 hex digits"
	case k.PrevSHA256 != "" && !hexHash(k.PrevSHA256):
		return "prev_sha256 is not 64 hex digits"
	case len(k.Owner) > govern.MaxNodeIDBytes:
		return "owner is longer than a node id"
	}
	return ""
}

func hexHash(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == sha256.Size
}

// appendKeyRecord appends the record of k, which keyProblem passed.
func appendKeyRecord(dst []byte, k *syncwire.Key) []byte {
	var flags byte
	if k.Revoked {
		flags |= keyRevoked
	}
	if k.Scopes.AllowPassthrough {
		flags |= keyPassthrough
	}
	if k.Scopes.Models != nil {
		flags |= keyModels
	}
	if k.Scopes.Providers != nil {
		flags |= keyProviders
	}
	if k.Scopes.Endpoints != nil {
		flags |= keyEndpoints
	}
	if k.PrevSHA256 != "" {
		flags |= keyPrev
	}
	if k.Scopes.Customers != nil {
		flags |= keyCustomers
	}
	dst = append(dst, keyFormat, flags)
	dst, _ = hex.AppendDecode(dst, []byte(k.SHA256))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(k.ExpiresAt))
	if k.PrevSHA256 != "" {
		dst, _ = hex.AppendDecode(dst, []byte(k.PrevSHA256))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(k.PrevUntil))
	}
	dst = appendStr16(dst, k.Owner)
	dst = appendStr16(dst, clip(k.Name, 1024))
	for _, list := range [...][]string{k.Scopes.Models, k.Scopes.Providers, k.Scopes.Endpoints, k.Scopes.Customers} {
		if list == nil {
			continue
		}
		dst = binary.LittleEndian.AppendUint16(dst, uint16(min(len(list), 0xffff)))
		for i, v := range list {
			if i == 0xffff {
				break
			}
			dst = appendStr16(dst, v)
		}
	}
	return dst
}

// decodeKeyRecord decodes the record of kid; ok is false for a record
// this build cannot read (it is then unknown: refused, never widened).
func decodeKeyRecord(kid string, b []byte) (*keyEntry, bool) {
	r := reader{b: b}
	if r.u8() != keyFormat {
		return nil, false
	}
	flags := r.u8()
	k := &keyEntry{kid: kid, revoked: flags&keyRevoked != 0}
	copy(k.sha256[:], r.bytes(sha256.Size))
	k.expiresAt = int64(r.u64())
	if flags&keyPrev != 0 {
		k.hasPrev = true
		copy(k.prev[:], r.bytes(sha256.Size))
		k.prevUntil = int64(r.u64())
	}
	k.owner = r.str16()
	k.name = r.str16()
	k.scopes.AllowPassthrough = flags&keyPassthrough != 0
	for _, f := range [...]struct {
		bit byte
		dst *[]string
	}{{keyModels, &k.scopes.Models}, {keyProviders, &k.scopes.Providers}, {keyEndpoints, &k.scopes.Endpoints}, {keyCustomers, &k.scopes.Customers}} {
		if flags&f.bit == 0 {
			continue
		}
		n := int(r.u16())
		list := make([]string, 0, min(n, 64))
		for i := 0; i < n && !r.bad; i++ {
			list = append(list, r.str16())
		}
		*f.dst = list
	}
	if r.bad || r.p != len(r.b) {
		return nil, false
	}
	return k, true
}

func appendStr16(dst []byte, s string) []byte {
	s = clip(s, maxEntryBytes)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// reader reads the binary records; a read past the end sets bad and
// returns zeros.
type reader struct {
	b   []byte
	p   int
	bad bool
}

//go:noinline
func (r *reader) bytes(n int) []byte {
	if r.bad || n < 0 || r.p+n > len(r.b) {
		r.bad = true
		return nil
	}
	s := r.b[r.p : r.p+n]
	r.p += n
	return s
}

//go:noinline
func (r *reader) u8() byte {
	if b := r.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

//go:noinline
func (r *reader) u16() uint16 {
	if b := r.bytes(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

//go:noinline
func (r *reader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

//go:noinline
func (r *reader) u64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

//go:noinline
func (r *reader) str16() string { return string(r.bytes(int(r.u16()))) }
