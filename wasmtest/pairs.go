package wasmtest

import (
	"encoding/binary"
	"net/http"
	"sort"
	"strings"
)

// hpair is one header: the name is lower-case, as Envoy stores it.
type hpair struct{ k, v string }

// hmap is a header map in arrival order (shared/proxy-wasm.md 1.5). Envoy keeps
// several values for one name as separate entries; so does hmap.
type hmap []hpair

// Limits on a serialized map coming from the guest (cpp-host limits.h).
const (
	maxPairsSize  = 1 << 20
	maxPairsCount = 1024
)

func (m hmap) get(k string) (string, bool) {
	for i := range m {
		if m[i].k == k {
			return m[i].v, true
		}
	}
	return "", false
}

// getFold finds the first value whose name equals key ignoring ASCII case,
// without allocating: key is a view of guest memory.
func (m hmap) getFold(key []byte) (string, bool) {
	for i := range m {
		if equalLower(m[i].k, key) {
			return m[i].v, true
		}
	}
	return "", false
}

func (m *hmap) add(k, v string) { *m = append(*m, hpair{k, v}) }

// replace sets the first entry named k to v and drops the others, or adds it.
func (m *hmap) replace(k, v string) {
	s := *m
	found := false
	j := 0
	for i := range s {
		if s[i].k == k {
			if found {
				continue
			}
			found = true
			s[i].v = v
		}
		s[j] = s[i]
		j++
	}
	clear(s[j:])
	s = s[:j]
	if !found {
		s = append(s, hpair{k, v})
	}
	*m = s
}

func (m *hmap) remove(k string) {
	s := *m
	j := 0
	for i := range s {
		if s[i].k == k {
			continue
		}
		s[j] = s[i]
		j++
	}
	clear(s[j:])
	*m = s[:j]
}

// byteSize is Envoy's HeaderMap::byteSize: the bytes of every name and value.
func (m hmap) byteSize() int {
	n := 0
	for i := range m {
		n += len(m[i].k) + len(m[i].v)
	}
	return n
}

// pairsSize is the size of m in the pair format; 0 for an empty map, which the
// host hands over as (0,0).
func (m hmap) pairsSize() int {
	if len(m) == 0 {
		return 0
	}
	n := 4
	for i := range m {
		n += 8 + len(m[i].k) + 1 + len(m[i].v) + 1
	}
	return n
}

// marshalTo writes m in the pair format into b, which has pairsSize bytes.
func (m hmap) marshalTo(b []byte) {
	binary.LittleEndian.PutUint32(b, uint32(len(m)))
	p := 4
	for i := range m {
		binary.LittleEndian.PutUint32(b[p:], uint32(len(m[i].k)))
		binary.LittleEndian.PutUint32(b[p+4:], uint32(len(m[i].v)))
		p += 8
	}
	for i := range m {
		p += copy(b[p:], m[i].k)
		b[p] = 0
		p++
		p += copy(b[p:], m[i].v)
		b[p] = 0
		p++
	}
}

// parsePairs decodes the pair format, copying out of guest memory and
// lower-casing names. Empty input (no bytes, or a count of 0 alone) is an
// empty map. Malformed input (a short header, a size that does not add up,
// a missing NUL, trailing bytes, more than the pair format's limits) is
// not a map: ok is false. cpp-host reads such input as an empty map and
// answers OK, which a filter cannot tell from success; this host refuses
// it instead, so a call never empties a map by accident.
func parsePairs(b []byte) (m hmap, ok bool) {
	if len(b) == 0 {
		return nil, true
	}
	if len(b) < 4 || len(b) > maxPairsSize {
		return nil, false
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n == 0 {
		return nil, len(b) == 4
	}
	if n > maxPairsCount || 4+8*n > len(b) {
		return nil, false
	}
	p := 4 + 8*n
	total := p
	for i := 0; i < n; i++ {
		total += int(binary.LittleEndian.Uint32(b[4+8*i:])) + int(binary.LittleEndian.Uint32(b[8+8*i:])) + 2
		if total > len(b) {
			return nil, false
		}
	}
	if total != len(b) {
		return nil, false
	}
	m = make(hmap, n)
	for i := 0; i < n; i++ {
		kl := int(binary.LittleEndian.Uint32(b[4+8*i:]))
		vl := int(binary.LittleEndian.Uint32(b[8+8*i:]))
		if b[p+kl] != 0 || b[p+kl+1+vl] != 0 {
			return nil, false
		}
		m[i] = hpair{lowerBytes(b[p : p+kl]), string(b[p+kl+1 : p+kl+1+vl])}
		p += kl + 1 + vl + 1
	}
	return m, true
}

// fits reports whether m can still be handed to a guest and back in the
// pair format: at most maxPairsCount pairs and maxPairsSize bytes.
func (m hmap) fits() bool {
	return len(m) <= maxPairsCount && m.pairsSize() <= maxPairsSize
}

// equalLower reports whether lower (already lower-case) equals b ignoring
// ASCII case.
func equalLower(lower string, b []byte) bool {
	if len(lower) != len(b) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if lower[i] != c {
			return false
		}
	}
	return true
}

// lowerBytes returns b as a lower-case string (one allocation).
func lowerBytes(b []byte) string {
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			out := []byte(string(b))
			for i, c := range out {
				if 'A' <= c && c <= 'Z' {
					out[i] = c + 'a' - 'A'
				}
			}
			return string(out)
		}
	}
	return string(b)
}

// lowerKey lower-cases a Go header name, using a table for the common ones so
// the request path does not allocate for them.
func lowerKey(k string) string {
	if l, ok := commonLower[k]; ok {
		return l
	}
	return strings.ToLower(k)
}

var commonLower = func() map[string]string {
	names := []string{"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
		"Connection", "Content-Encoding", "Content-Length", "Content-Type", "Cookie", "Date", "Etag",
		"Expect", "Host", "Last-Modified", "Location", "Origin", "Referer", "Server", "Set-Cookie",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade", "User-Agent", "Vary", "Via",
		"X-Forwarded-For", "X-Forwarded-Proto", "X-Request-Id", "Openai-Organization",
		"Openai-Project", "Anthropic-Version", "Anthropic-Beta", "X-Api-Key", "Keep-Alive",
		"Proxy-Connection", "Retry-After", "X-Stub-Delay-Ms", "X-Stub-Completion-Tokens"}
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[n] = strings.ToLower(n)
	}
	return m
}()

// hopByHop lists the connection-level headers a proxy does not forward.
func hopByHop(k string) bool {
	switch k {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "upgrade", "trailer", "proxy-authenticate", "proxy-authorization":
		return true
	}
	return false
}

// appendHeader appends the entries of h to m with lower-case names, sorted by
// name so that a map built from a Go http.Header is deterministic; values of
// one name keep their order. Hop-by-hop headers are left out.
func appendHeader(m hmap, h http.Header) hmap {
	var keys [32]string
	ks := keys[:0]
	for k := range h {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		lk := lowerKey(k)
		if hopByHop(lk) {
			continue
		}
		for _, v := range h[k] {
			m = append(m, hpair{lk, v})
		}
	}
	return m
}

// toHeader copies the regular (non-pseudo) entries of m into h with canonical
// names, leaving out hop-by-hop headers and those named in skip.
func (m hmap) toHeader(h http.Header, skip ...string) {
outer:
	for i := range m {
		k := m[i].k
		if k == "" || k[0] == ':' || hopByHop(k) {
			continue
		}
		for _, s := range skip {
			if k == s {
				continue outer
			}
		}
		ck := canonicalKey(k)
		h[ck] = append(h[ck], m[i].v)
	}
}

func canonicalKey(k string) string {
	if c, ok := commonCanonical[k]; ok {
		return c
	}
	return http.CanonicalHeaderKey(k)
}

var commonCanonical = func() map[string]string {
	m := make(map[string]string, len(commonLower))
	for c, l := range commonLower {
		m[l] = c
	}
	return m
}()
