package govern

import (
	"strconv"
	"strings"
)

// A counter's identity (seed 004) is the limit id, the node, the values of
// the dims the limit constrains, the period and the algorithm, never the
// amount: editing an amount keeps the counter and its usage, while changing
// period: or algorithm: rotates it to a fresh cell. The type is included as
// well, so that reusing an id for a limit of another unit (budget_usd to
// quota_tokens over the same period) cannot read dollars as tokens.
//
// The form is six fields separated by "|":
//
//	<id>|<type>|<node>|<dims>|<period>|<algorithm>
//	team_tpm|tpm|org:acme/team:ml|model=gpt-4o|1m0s|gcra
//	acme_month|budget_usd|org:acme||month|
//
// where <dims> lists model=, provider=, endpoint=, customer= and tag= (in
// that order, only the dims the limit constrains) separated by ",". In the
// node and the dim values "%", "|", "," and "=" are percent-escaped, so two
// different inputs never produce the same identity. A limit counting input
// or output tokens (metric:) names it in the type field (tpm:output); a
// period in a time zone names the zone (month@Europe/Berlin). The value of
// a tag dim is the one tag the instance counts (Dims.Tags holds it).

// Identity returns the counter identity of limit l at node for a request
// with dims d.
func Identity(l *Limit, node string, d Dims) string {
	return string(AppendIdentity(make([]byte, 0, 64), l, node, d))
}

// AppendIdentity appends the counter identity of l at node for dims d to dst
// and returns the extended buffer; it allocates only to grow dst.
func AppendIdentity(dst []byte, l *Limit, node string, d Dims) []byte {
	dst = append(dst, l.ID...)
	dst = append(dst, '|')
	if l.typeField != "" {
		dst = append(dst, l.typeField...)
	} else {
		dst = append(dst, l.Type.String()...)
	}
	dst = append(dst, '|')
	dst = appendEscaped(dst, node)
	dst = append(dst, '|')
	sep := false
	for _, dim := range [5]struct {
		name           string
		match, request string
	}{{"model=", l.Match.Model, d.Model}, {"provider=", l.Match.Provider, d.Provider}, {"endpoint=", l.Match.Endpoint, d.Endpoint},
		{"customer=", l.Match.Customer, d.Customer}, {"tag=", l.Match.Tag, d.Tags}} {
		if dim.match == "" {
			continue
		}
		if sep {
			dst = append(dst, ',')
		}
		sep = true
		dst = append(dst, dim.name...)
		dst = appendEscaped(dst, dim.request)
	}
	dst = append(dst, '|')
	if l.period != "" {
		dst = append(dst, l.period...)
	} else {
		dst = append(dst, l.Period.identity()...)
	}
	dst = append(dst, '|')
	return append(dst, AlgorithmName(l.Algorithm)...)
}

const hexDigits = "0123456789ABCDEF"

func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%', '|', ',', '=':
			dst = append(dst, '%', hexDigits[c>>4], hexDigits[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// InstanceDims are the dims the identity of l's instance names for a
// request with dims d: the request's value of each dim l keeps one
// counter per value of (a pattern), the match's value of each dim it
// names exactly; tag is the tag a per-tag instance counts.
func (l *Limit) InstanceDims(d Dims, tag string) Dims {
	out := Dims{Model: l.Match.Model, Provider: l.Match.Provider, Endpoint: l.Match.Endpoint, Customer: l.Match.Customer, Tags: l.Match.Tag}
	if l.glob {
		out.Model = d.Model
	}
	if l.customerGlob {
		out.Customer = d.Customer
	}
	if l.tagGlob {
		out.Tags = tag
	}
	return out
}

// OverflowIdentity is the identity of the counter that values of l's
// per-value dims past max_distinct share at node: each per-value dim's
// value is Overflow.
func OverflowIdentity(l *Limit, node string) string {
	d := l.InstanceDims(Dims{Model: Overflow, Customer: Overflow}, Overflow)
	return Identity(l, node, d)
}

// DistinctBase is what every identity of l at node starts with, the dims
// field included up to its first per-value dim: the counters of one
// instance's values share it.
func DistinctBase(l *Limit, node string) string {
	id := OverflowIdentity(l, node)
	// The first "*" in the dims field is the first per-value dim's value.
	if i := strings.Index(id, "="+Overflow); i >= 0 {
		return id[:i+1]
	}
	return id
}

// ParseIdentity reads the limit id and the node of a counter identity
// (the node's escapes undone).
func ParseIdentity(id string) (limitID, node string, ok bool) {
	f := strings.SplitN(id, "|", 4)
	if len(f) < 4 {
		return "", "", false
	}
	n := f[2]
	if strings.IndexByte(n, '%') >= 0 {
		b := make([]byte, 0, len(n))
		for i := 0; i < len(n); i++ {
			if n[i] == '%' && i+2 < len(n) {
				if v, err := strconv.ParseUint(n[i+1:i+3], 16, 8); err == nil {
					b = append(b, byte(v))
					i += 2
					continue
				}
			}
			b = append(b, n[i])
		}
		n = string(b)
	}
	return f[0], n, true
}
