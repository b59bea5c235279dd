package filter

import (
	"strconv"

	"github.com/tokentriage/tokentriage/shared/jsontok/jv"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// The feed's items are read with jv. A missing or null member reads as
// its zero value (a null scope list stays nil: unrestricted). An item of
// the wrong shape is left out rather than read loosely (a scope list
// misread as absent would widen the key).

// decodeKeySlow reads one key of the feed with path lookups: what
// decodeKey reads, or the first member of the wrong kind. The kid is
// returned when it can be read, so that the key can be left out by name.
func decodeKeySlow(v jv.Value) (syncwire.Key, error) {
	if err := checkShape(v, "key", keyShape); err != nil {
		k := syncwire.Key{}
		if kid := v.Get("kid"); kid.Type == jv.String {
			k.KID = kid.Str
		}
		return k, err
	}
	return syncwire.Key{
		KID:     v.Get("kid").Str,
		SHA256:  v.Get("sha256").Str,
		Owner:   v.Get("owner").Str,
		Revoked: v.Get("revoked").Type == jv.True,
		Scopes: vkey.Scopes{
			Models:           stringList(v.Get("scopes.models")),
			Providers:        stringList(v.Get("scopes.providers")),
			Endpoints:        stringList(v.Get("scopes.endpoints")),
			AllowPassthrough: v.Get("scopes.allow_passthrough").Type == jv.True,
			Customers:        stringList(v.Get("scopes.customers")),
		},
		Name:       v.Get("name").Str,
		ExpiresAt:  intOf(v.Get("expires_at")),
		PrevSHA256: v.Get("prev_sha256").Str,
		PrevUntil:  intOf(v.Get("prev_until")),
		Gone:       v.Get("gone").Type == jv.True,
	}, nil
}

func intOf(v jv.Value) int64 {
	n, _ := strconv.ParseInt(v.Raw, 10, 64)
	return n
}

// keyMember is the bit and kind (as checkShape has it) of a key's member,
// or kind 0 for a member this build does not read.
func keyMember(name string) (bit uint16, kind byte) {
	switch name {
	case "kid":
		return 1 << 0, 's'
	case "sha256":
		return 1 << 1, 's'
	case "owner":
		return 1 << 2, 's'
	case "revoked":
		return 1 << 3, 'b'
	case "scopes":
		return 1 << 4, 'o'
	case "name":
		return 1 << 5, 's'
	case "expires_at":
		return 1 << 6, 'i'
	case "prev_sha256":
		return 1 << 7, 's'
	case "prev_until":
		return 1 << 8, 'i'
	case "gone":
		return 1 << 9, 'b'
	}
	return 0, 0
}

// decodeKey reads one well-formed key in one pass over its members: what
// decodeKeySlow reads, or ok false when the key is of the wrong shape or
// has a member name repeated or spelt with escapes (decodeKeySlow then
// decides it). A first sync of a million keys reads them all, so the
// common case takes no path lookups.
func decodeKey(v jv.Value) (k syncwire.Key, ok bool) {
	if !v.IsObject() {
		return k, false
	}
	ok = true
	var seen uint16
	v.ForEach(func(key, f jv.Value) bool {
		if len(key.Raw) != len(key.Str)+2 {
			ok = false // escaped: may spell a member below
			return false
		}
		bit, kind := keyMember(key.Str)
		if kind == 0 {
			return true
		}
		if seen&bit != 0 {
			ok = false // repeated
			return false
		}
		seen |= bit
		if f.Type == jv.Null {
			return true
		}
		switch kind {
		case 's':
			if f.Type != jv.String {
				ok = false
				return false
			}
			switch key.Str {
			case "kid":
				k.KID = f.Str
			case "sha256":
				k.SHA256 = f.Str
			case "owner":
				k.Owner = f.Str
			case "name":
				k.Name = f.Str
			case "prev_sha256":
				k.PrevSHA256 = f.Str
			}
		case 'b':
			if f.Type != jv.True && f.Type != jv.False {
				ok = false
				return false
			}
			if key.Str == "revoked" {
				k.Revoked = f.Type == jv.True
			} else {
				k.Gone = f.Type == jv.True
			}
		case 'i':
			n, err := strconv.ParseInt(f.Raw, 10, 64)
			if f.Type != jv.Number || err != nil {
				ok = false
				return false
			}
			if key.Str == "expires_at" {
				k.ExpiresAt = n
			} else {
				k.PrevUntil = n
			}
		case 'o':
			ok = decodeScopes(f, &k.Scopes)
		}
		return ok
	})
	return k, ok
}

// decodeScopes reads a key's scopes object in one pass; false as decodeKey.
func decodeScopes(v jv.Value, sc *vkey.Scopes) bool {
	if !v.IsObject() {
		return false
	}
	ok := true
	var seen uint8
	v.ForEach(func(key, f jv.Value) bool {
		if len(key.Raw) != len(key.Str)+2 {
			ok = false
			return false
		}
		var bit uint8
		var dst *[]string
		switch key.Str {
		case "models":
			bit, dst = 1, &sc.Models
		case "providers":
			bit, dst = 2, &sc.Providers
		case "endpoints":
			bit, dst = 4, &sc.Endpoints
		case "allow_passthrough":
			bit = 8
		case "customers":
			bit, dst = 16, &sc.Customers
		default:
			return true
		}
		if seen&bit != 0 {
			ok = false
			return false
		}
		seen |= bit
		if dst == nil {
			switch f.Type {
			case jv.True:
				sc.AllowPassthrough = true
			case jv.False, jv.Null:
			default:
				ok = false
			}
			return ok
		}
		switch {
		case f.Type == jv.Null:
		case f.IsArray():
			list := []string{}
			f.ForEach(func(_, e jv.Value) bool {
				if e.Type != jv.String {
					ok = false
					return false
				}
				list = append(list, e.Str)
				return true
			})
			*dst = list
		default:
			ok = false
		}
		return ok
	})
	return ok
}

// syncField is one member a synced object may carry and the kind it must
// have when present and not null: 's' string, 'b' boolean, 'i' integer
// (int64), 'o' object, 'l' list of strings, 'a' list.
type syncField struct {
	path string
	kind byte
}

var (
	keyShape = []syncField{{"kid", 's'}, {"sha256", 's'}, {"owner", 's'}, {"revoked", 'b'}, {"scopes", 'o'},
		{"scopes.models", 'l'}, {"scopes.providers", 'l'}, {"scopes.endpoints", 'l'}, {"scopes.allow_passthrough", 'b'}, {"scopes.customers", 'l'},
		{"name", 's'}, {"expires_at", 'i'}, {"prev_sha256", 's'}, {"prev_until", 'i'}, {"gone", 'b'}}
	overrideShape = []syncField{{"limit_id", 's'}, {"node", 's'}, {"amount", 'i'}, {"gone", 'b'}}
	kindNames     = map[byte]string{'s': "a string", 'b': "true or false", 'i': "an integer", 'o': "an object", 'l': "a list of strings", 'a': "a list"}
)

// checkShape checks that v is an object whose fields have their kinds.
func checkShape(v jv.Value, at string, fields []syncField) error {
	if !v.IsObject() {
		return shapeError(at, "an object", v)
	}
	for _, f := range fields {
		x := v.Get(f.path)
		bad := x
		ok := x.Type == jv.Null
		switch f.kind {
		case 's':
			ok = ok || x.Type == jv.String
		case 'b':
			ok = ok || x.Type == jv.True || x.Type == jv.False
		case 'i':
			_, err := strconv.ParseInt(x.Raw, 10, 64)
			ok = ok || x.Type == jv.Number && err == nil
		case 'o':
			ok = ok || x.IsObject()
		case 'a':
			ok = ok || x.IsArray()
		case 'l':
			ok = ok || x.IsArray()
			if ok && x.IsArray() {
				x.ForEach(func(_, e jv.Value) bool {
					if e.Type != jv.String {
						ok, bad = false, e
					}
					return ok
				})
			}
		}
		if !ok {
			return shapeError(at+"."+f.path, kindNames[f.kind], bad)
		}
	}
	return nil
}

func shapeError(at, want string, got jv.Value) error {
	return planError(at + ": expected " + want + ", got " + got.Type.String())
}

// stringList reads a list checkShape has checked: null or absent is nil,
// [] is empty.
func stringList(v jv.Value) []string {
	if !v.IsArray() {
		return nil
	}
	out := []string{}
	v.ForEach(func(_, e jv.Value) bool {
		out = append(out, e.Str)
		return true
	})
	return out
}
