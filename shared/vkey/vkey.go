// Package vkey owns the virtual key format: how a key is minted, how its kid
// is derived from it, how its secret is hashed and compared, and the scopes a
// key carries.
//
// A key is "tt-" + kid + "-" + secret, where kid is "vk_" followed by 12
// base62 characters and secret is 32 base62 characters:
//
//	tt-vk_FEKZdMs2UQRi-3kLwQ0vX9bY2cD4eF6gH8iJ0kL2mN4oP
//
// Only SHA-256(key), hex encoded, is ever stored. The kid is public: it names
// the key in ledger rows, 429s and the management API.
package vkey

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

const (
	prefix    = "tt-"
	kidPrefix = "vk_"
	kidChars  = 12
	secChars  = 32
	alphabet  = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// Scopes restrict what a key may call. A nil list means unrestricted.
// Models are path.Match patterns checked against the requested model;
// providers and endpoints are compared exactly. AllowPassthrough permits
// paths that are not one of the governed provider endpoints. Customers
// are path.Match patterns the request's customer (X-Tt-Customer, or the
// body's user fields) must match: a key restricted to customers serves no
// request that names none.
type Scopes struct {
	Models           []string `json:"models"`
	Providers        []string `json:"providers"`
	Endpoints        []string `json:"endpoints"`
	AllowPassthrough bool     `json:"allow_passthrough"`
	Customers        []string `json:"customers,omitempty"`
}

// Mint returns a new key and its kid, drawing randomness from r. Characters
// are drawn by rejection sampling, so each is uniform over base62.
func Mint(r io.Reader) (key, kid string, err error) {
	chars := make([]byte, 0, kidChars+secChars)
	buf := make([]byte, 64)
	for len(chars) < cap(chars) {
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", "", fmt.Errorf("vkey: mint: reading randomness: %w", err)
		}
		for _, c := range buf {
			if c < 248 && len(chars) < cap(chars) { // 248 = 4*62: no modulo bias
				chars = append(chars, alphabet[c%62])
			}
		}
	}
	key = prefix + kidPrefix + string(chars[:kidChars]) + "-" + string(chars[kidChars:])
	return key, key[len(prefix) : len(prefix)+len(kidPrefix)+kidChars], nil
}

// Rotate returns a new key for the existing kid: a fresh secret drawn
// from r as Mint draws one, under the same id, so the key keeps its
// limits, counters and history.
func Rotate(r io.Reader, kid string) (string, error) {
	if !ValidKID(kid) {
		return "", fmt.Errorf("vkey: rotate: %q is not a kid", kid)
	}
	key, _, err := Mint(r)
	if err != nil {
		return "", err
	}
	return prefix + kid + key[len(prefix)+len(kidPrefix)+kidChars:], nil
}

// ErrMalformed is returned by KID for a string that is not a virtual key.
var ErrMalformed = errors.New("not a tokentriage virtual key (expected tt-vk_<12 chars>-<32 chars>)")

// KID derives the kid from a presented key without looking anything up.
func KID(key string) (string, error) {
	if len(key) != len(prefix)+len(kidPrefix)+kidChars+1+secChars ||
		!strings.HasPrefix(key, prefix+kidPrefix) || key[len(prefix)+len(kidPrefix)+kidChars] != '-' {
		return "", ErrMalformed
	}
	for i := len(prefix) + len(kidPrefix); i < len(key); i++ {
		if i == len(prefix)+len(kidPrefix)+kidChars {
			continue
		}
		if !isBase62(key[i]) {
			return "", ErrMalformed
		}
	}
	return key[len(prefix) : len(prefix)+len(kidPrefix)+kidChars], nil
}

// ValidKID reports whether s has the shape of a kid.
func ValidKID(s string) bool {
	if len(s) != len(kidPrefix)+kidChars || !strings.HasPrefix(s, kidPrefix) {
		return false
	}
	for i := len(kidPrefix); i < len(s); i++ {
		if !isBase62(s[i]) {
			return false
		}
	}
	return true
}

// Hash returns the hex SHA-256 of a key, the only form in which it is stored.
func Hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Verify reports whether key hashes to wantHex, comparing in constant time.
func Verify(key, wantHex string) bool {
	want, err := hex.DecodeString(wantHex)
	if err != nil || len(want) != sha256.Size {
		return false
	}
	sum := sha256.Sum256([]byte(key))
	return subtle.ConstantTimeCompare(sum[:], want) == 1
}

func isBase62(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
}
