package wasmtest

import (
	"net/http"
	"strconv"
)

// Envoy's defaults for the header limits (the connection manager's
// max_request_headers_count and max_request_headers_kb, a cluster's
// max_headers_count and max_response_headers_kb).
const (
	DefaultMaxHeadersCount = 100
	DefaultMaxHeadersKB    = 60
)

// headerLimits is one direction's limits: the header fields a block may
// hold and their bytes (names and values; for a request, the method and
// the request target too).
type headerLimits struct {
	count, bytes int
	countName    string // the Envoy setting, for messages
	kbName       string
}

func newHeaderLimits(count, kb int, countName, kbName string) headerLimits {
	if count <= 0 {
		count = DefaultMaxHeadersCount
	}
	if kb <= 0 {
		kb = DefaultMaxHeadersKB
	}
	return headerLimits{count: count, bytes: kb << 10, countName: countName, kbName: kbName}
}

// over says how a block of n fields and size bytes passes the limits, or
// "" when it does not.
func (l headerLimits) over(n, size int) string {
	switch {
	case n > l.count:
		return strconv.Itoa(n) + " header fields; the most this proxy takes is " + strconv.Itoa(l.count) + " (" + l.countName + ")"
	case size > l.bytes:
		return strconv.Itoa(size) + " bytes of headers; the most this proxy takes is " + strconv.Itoa(l.bytes>>10) + " KiB (" + l.kbName + ")"
	}
	return ""
}

// requestOver says how a client's request headers pass the request
// limits, or "". Every field counts once (a name sent twice is two), Host
// included; their bytes are the names and values plus the method and the
// request target.
func (l headerLimits) requestOver(r *http.Request) string {
	n, size := 0, len(r.Method)+len(r.RequestURI)
	if r.RequestURI == "" && r.URL != nil {
		size += len(r.URL.RequestURI())
	}
	if r.Host != "" {
		n++
		size += len("host") + len(r.Host)
	}
	for k, vs := range r.Header {
		n += len(vs)
		for _, v := range vs {
			size += len(k) + len(v)
		}
	}
	return l.over(n, size)
}

// mapOver says how a header map passes the limits, or "" (pseudo-headers
// are not fields of the block and do not count).
func (l headerLimits) mapOver(m hmap) string {
	n, size := 0, 0
	for i := range m {
		if k := m[i].k; k == "" || k[0] != ':' {
			n++
			size += len(k) + len(m[i].v)
		}
	}
	return l.over(n, size)
}
