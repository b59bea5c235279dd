package wire

import (
	"github.com/tokentriage/tokentriage/shared/jsontok"
	"time"
)

// Header names, spelled as the seeds print them. Hosts may lowercase them
// (HTTP/2); the order the appenders produce is the seeds' order.
const (
	HeaderContentType     = "Content-Type"
	HeaderRatelimit       = "Ratelimit"
	HeaderRatelimitPolicy = "Ratelimit-Policy"
	HeaderRetryAfter      = "Retry-After"
	HeaderRefusalType     = "X-Tt-Refusal-Type"
	HeaderRefusedBy       = "X-Tt-Refused-By"
	HeaderRequestID       = "X-Tt-Request-Id"
	// HeaderFallback names, on a response served with a limit's fallback
	// model, the limit and the model: "<limit_id>;model=<model>".
	HeaderFallback = "X-Tt-Fallback"
	HeaderAllow    = "Allow"
	// HeaderModel and HeaderProvider are set on a request the gateway
	// holds until gate 2 (hold_headers): the model its body asks for and
	// the provider it resolved to, for routes to match on. A client's own
	// values never reach the upstream.
	HeaderModel        = "x-tt-model"
	HeaderProvider     = "x-tt-provider"
	HeaderAuthenticate = "WWW-Authenticate"

	HeaderLimitRequests     = "X-Ratelimit-Limit-Requests"
	HeaderRemainingRequests = "X-Ratelimit-Remaining-Requests"
	HeaderLimitTokens       = "X-Ratelimit-Limit-Tokens"
	HeaderRemainingTokens   = "X-Ratelimit-Remaining-Tokens"

	contentTypeJSON = "application/json"
)

// Seconds rounds a wait up to whole seconds, the unit of Retry-After,
// retry_after_s and the Ratelimit t parameter: 38.346 s is 39, so a client
// that waits as told is never early. Zero and negative waits are 0.
func Seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// ratelimitItem renders one Ratelimit (or Ratelimit-Policy) item:
// "<id>";<k1>=<v1>;<k2>=<v2>.
func ratelimitItem(dst []byte, id string, k1 byte, v1 int64, k2 byte, v2 int64) []byte {
	dst = append(dst, '"')
	dst = append(dst, id...)
	dst = append(dst, '"', ';', k1, '=')
	dst = jsontok.AppendInt(dst, v1)
	dst = append(dst, ';', k2, '=')
	return jsontok.AppendInt(dst, v2)
}
