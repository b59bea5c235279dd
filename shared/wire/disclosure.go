package wire

import (
	"github.com/tokentriage/tokentriage/shared/jsontok"
	"time"
)

// Disclosure is what a served response tells the caller about its tightest
// rate limits when governance.keys.disclose_limits is on (seed 002):
//
//	Ratelimit-Policy: "team_rpm";q=300;w=60
//	X-Ratelimit-Limit-Requests: 300
//	X-Ratelimit-Remaining-Requests: 59
//
// and the token pair X-Ratelimit-Limit-Tokens / X-Ratelimit-Remaining-Tokens
// for a tpm limit. With both, Ratelimit-Policy lists the rpm item, then the
// tpm item, as one structured-field list. A Policy with an empty LimitID is
// absent.
type Disclosure struct {
	Requests Policy // the tightest rpm limit
	Tokens   Policy // the tightest tpm limit
}

// Policy is one disclosed rate limit.
type Policy struct {
	LimitID string
	// Quota is the limit's amount per window (q= and X-Ratelimit-Limit-*).
	Quota int64
	// Window is the limit's period; w= is it in whole seconds, rounded up.
	Window time.Duration
	// Remaining is the cell's remaining after this request was counted
	// (rate.Result.Remaining): it tracks the burst depth, not the amount.
	Remaining int64
	// Advisory marks a limit that refuses nothing (shadow mode, soft
	// enforcement): it is disclosed only when no enforcing limit is.
	Advisory bool
}

// AppendHeaders appends the disclosure headers; nothing when neither
// policy is present. All the values share one string allocation.
func (d *Disclosure) AppendHeaders(dst [][2]string) [][2]string {
	req, tok := d.Requests.LimitID != "", d.Tokens.LimitID != ""
	if !req && !tok {
		return dst
	}
	var buf [128]byte
	b := buf[:0]
	if req {
		b = d.Requests.appendItem(b)
	}
	if tok {
		if req {
			b = append(b, ", "...)
		}
		b = d.Tokens.appendItem(b)
	}
	var cut [5]int
	cut[0] = len(b)
	if req {
		b = jsontok.AppendInt(b, d.Requests.Quota)
		cut[1] = len(b)
		b = jsontok.AppendInt(b, d.Requests.Remaining)
		cut[2] = len(b)
	}
	if tok {
		cut[2] = len(b)
		b = jsontok.AppendInt(b, d.Tokens.Quota)
		cut[3] = len(b)
		b = jsontok.AppendInt(b, d.Tokens.Remaining)
		cut[4] = len(b)
	}
	v := string(b)
	dst = append(dst, [2]string{HeaderRatelimitPolicy, v[:cut[0]]})
	if req {
		dst = append(dst,
			[2]string{HeaderLimitRequests, v[cut[0]:cut[1]]},
			[2]string{HeaderRemainingRequests, v[cut[1]:cut[2]]})
	}
	if tok {
		dst = append(dst,
			[2]string{HeaderLimitTokens, v[cut[2]:cut[3]]},
			[2]string{HeaderRemainingTokens, v[cut[3]:cut[4]]})
	}
	return dst
}

func (p *Policy) appendItem(dst []byte) []byte {
	return ratelimitItem(dst, p.LimitID, 'q', p.Quota, 'w', Seconds(p.Window))
}
