package filter

import (
	"crypto/subtle"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/pluginconf"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// keyEntry is one virtual key the VM knows: from the plugin configuration's
// static table or minted by the accountant.
type keyEntry struct {
	kid     string
	sha256  string
	owner   string
	scopes  vkey.Scopes
	revoked bool
	// name is the key's name ("" none); expiresAt when it stops
	// authenticating (Unix seconds, 0 never); prevSHA256 the hash of its
	// secret before the last rotation, accepted until prevUntil.
	name       string
	expiresAt  int64
	prevSHA256 string
	prevUntil  int64
	// verified is the last presented key that hashed to sha256, so a key
	// in steady use costs a constant-time compare instead of a SHA-256.
	verified string
	// verifiedPrev is verified for prevSHA256; it authenticates only
	// while the grace period lasts.
	verifiedPrev string
	// chain is the key's resolution chain (govern.AppendChain), built at
	// the key's first request and kept: a table of 100,000 keys most of
	// which are idle does not hold 100,000 chains.
	chain []string
}

// keyTable maps kid to key. Synced keys replace static ones with the same
// kid (the accountant is the later word).
type keyTable map[string]*keyEntry

func buildKeyTable(static []pluginconf.StaticKey, synced []syncwire.Key, old keyTable) keyTable {
	t := make(keyTable, len(static)+len(synced))
	for _, k := range static {
		t[k.KID] = &keyEntry{kid: k.KID, sha256: k.SHA256, owner: k.Owner, scopes: k.Scopes}
	}
	for _, k := range synced {
		t[k.KID] = &keyEntry{kid: k.KID, sha256: k.SHA256, owner: k.Owner, scopes: k.Scopes, revoked: k.Revoked,
			name: k.Name, expiresAt: k.ExpiresAt, prevSHA256: k.PrevSHA256, prevUntil: k.PrevUntil}
	}
	for kid, e := range t {
		if o := old[kid]; o != nil && o.sha256 == e.sha256 {
			e.verified = o.verified
			if o.prevSHA256 == e.prevSHA256 {
				e.verifiedPrev = o.verifiedPrev
			}
			if o.owner == e.owner {
				e.chain = o.chain
			}
		}
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
	authExpired // a key past its expires_at
)

// authenticate checks a presented key at now. The kid is derived from
// the key itself; the secret is compared by hash in constant time, with
// the secret before the key's last rotation accepted until its grace
// period ends. A key past its expiry is authExpired, once its secret is
// right (a wrong secret learns nothing of the key).
func (t keyTable) authenticate(key string, now time.Time) (authResult, *keyEntry, string) {
	if key == "" {
		return authAnonymous, nil, ""
	}
	kid, err := vkey.KID(key)
	if err != nil {
		return authMalformed, nil, ""
	}
	e := t[kid]
	if e == nil {
		return authUnknown, nil, kid
	}
	if !e.secretMatches(key, now.Unix()) {
		return authUnknown, nil, kid
	}
	if e.revoked {
		return authRevoked, e, kid
	}
	if e.expiresAt != 0 && now.Unix() >= e.expiresAt {
		return authExpired, e, kid
	}
	return authOK, e, kid
}

// secretMatches reports whether key is the key's secret, or its secret
// before the last rotation while that is still accepted (until
// prevUntil, Unix seconds).
func (e *keyEntry) secretMatches(key string, now int64) bool {
	if e.verified != "" && subtle.ConstantTimeCompare([]byte(e.verified), []byte(key)) == 1 {
		return true
	}
	if e.prevSHA256 != "" && now < e.prevUntil {
		if e.verifiedPrev != "" && subtle.ConstantTimeCompare([]byte(e.verifiedPrev), []byte(key)) == 1 {
			return true
		}
	}
	if vkey.Verify(key, e.sha256) {
		e.verified = key
		return true
	}
	if e.prevSHA256 != "" && now < e.prevUntil && vkey.Verify(key, e.prevSHA256) {
		e.verifiedPrev = key
		return true
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
