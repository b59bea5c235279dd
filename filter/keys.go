package filter

import (
	"crypto/subtle"

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
	// verified is the last presented key that hashed to sha256, so a key
	// in steady use costs a constant-time compare instead of a SHA-256.
	verified string
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
		t[k.KID] = &keyEntry{kid: k.KID, sha256: k.SHA256, owner: k.Owner, scopes: k.Scopes, revoked: k.Revoked}
	}
	for kid, e := range t {
		if o := old[kid]; o != nil && o.sha256 == e.sha256 {
			e.verified = o.verified
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
)

// authenticate checks a presented key. The kid is derived from the key
// itself; the secret is compared by hash in constant time.
func (t keyTable) authenticate(key string) (authResult, *keyEntry, string) {
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
	if e.verified == "" || subtle.ConstantTimeCompare([]byte(e.verified), []byte(key)) != 1 {
		if !vkey.Verify(key, e.sha256) {
			return authUnknown, nil, kid
		}
		e.verified = key
	}
	if e.revoked {
		return authRevoked, e, kid
	}
	return authOK, e, kid
}

// chainOf is the key's resolution chain, built at its first use.
func (k *keyEntry) chainOf() []string {
	if k.chain == nil {
		k.chain = govern.AppendChain(nil, k.owner, k.kid)
	}
	return k.chain
}
