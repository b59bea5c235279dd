package wire

import (
	"github.com/tokentriage/tokentriage/shared/jsontok"
	"strconv"
	"strings"
	"time"
)

// Rejection is a refusal that is not a limit breach: a missing or unknown
// key, a scope the key lacks, a body the gate cannot read or will not
// buffer, a limit that cannot be checked under fail: closed, an unknown
// /tt/ path. Its body has the same {"error":{"type":…,"message":…}} shape as
// a 429, without refused_by or enforcement; the message says what was wrong
// and what to do.
//
// Headers, in order: Content-Type, then Allow (405) or WWW-Authenticate
// (401) when the status calls for one, X-Tt-Refusal-Type, X-Tt-Refused-By
// (503 only: the limit that could not be checked), X-Tt-Request-Id, then
// X-Should-Retry, X-Request-Id and Request-Id (the request id headers are
// omitted when RequestID is empty). Only a 503 says X-Should-Retry: true:
// what it waits for (an accountant's snapshot, a store) comes back on its
// own; nothing else a rejection names changes by retrying.
type Rejection struct {
	Status    int
	Type      string
	Message   string
	RequestID string
	// Shape is the body's form (Refusal.Shape).
	Shape Shape
	// Param names the request member at fault, for OpenAI's param
	// ("model" for a model outside the key's scope); "" is null.
	Param string
	// LimitID names the uncheckable limit of a 503.
	LimitID string
	// Allow lists the methods of a 405.
	Allow string
}

// error.type values of rejections.
const (
	TypeUnauthorized     = "unauthorized"
	TypeScopeDenied      = "scope_denied"
	TypeInvalidRequest   = "invalid_request"
	TypeRequestTooLarge  = "request_too_large"
	TypeLimitUnavailable = "limit_unavailable"
	TypeNotFound         = "not_found"
	TypeMethodNotAllowed = "method_not_allowed"
)

// ShouldRetry reports whether a retry can succeed without the caller
// changing anything: only for a 503.
func (r *Rejection) ShouldRetry() bool { return r.Status == 503 }

// AppendBody appends the JSON body in r.Shape.
func (r *Rejection) AppendBody(dst []byte) []byte {
	dst = appendHead(dst, r.Shape, r.Status, r.Type)
	dst = jsontok.AppendString(dst, r.Message)
	dst = appendTail(dst, r.Shape, r.Type, r.Param)
	return appendClose(dst, r.Shape, r.RequestID)
}

// AppendHeaders appends the response headers.
func (r *Rejection) AppendHeaders(dst [][2]string) [][2]string {
	dst = append(dst, [2]string{HeaderContentType, contentTypeJSON})
	switch {
	case r.Status == 401:
		dst = append(dst, [2]string{HeaderAuthenticate, `Bearer realm="tokentriage"`})
	case r.Status == 405 && r.Allow != "":
		dst = append(dst, [2]string{HeaderAllow, r.Allow})
	}
	dst = append(dst, [2]string{HeaderRefusalType, r.Type})
	if r.LimitID != "" {
		dst = append(dst, [2]string{HeaderRefusedBy, r.LimitID})
	}
	if r.RequestID != "" {
		dst = append(dst, [2]string{HeaderRequestID, r.RequestID})
	}
	return appendSDKHeaders(dst, r.ShouldRetry(), r.RequestID)
}

// Headers returns AppendHeaders(nil).
func (r *Rejection) Headers() [][2]string { return r.AppendHeaders(make([][2]string, 0, 8)) }

// MissingKey is the 401 for a request without a virtual key while
// require_key is on.
func MissingKey(requestID string) Rejection {
	return Rejection{Status: 401, Type: TypeUnauthorized, RequestID: requestID,
		Message: "missing virtual key: this gateway requires one; send it as Authorization: Bearer tt-vk_…"}
}

// AmbiguousKey is the 401 for a request carrying two different
// credentials (two Authorization headers, or an Authorization and an
// x-api-key naming different virtual keys): which one to bill and scope is
// not the gateway's guess to make.
func AmbiguousKey(requestID string) Rejection {
	return Rejection{Status: 401, Type: TypeUnauthorized, RequestID: requestID,
		Message: "two different credentials in one request (repeated Authorization or x-api-key headers, or both): send exactly one virtual key"}
}

// UnknownKey is the 401 for a well-formed virtual key this gateway does not
// know: kid is the key id derived from it.
func UnknownKey(requestID, kid string) Rejection {
	return Rejection{Status: 401, Type: TypeUnauthorized, RequestID: requestID,
		Message: "unknown virtual key " + kid + ": no key with this id and secret is known to this gateway; check the key, or mint one with tokentriage keys mint"}
}

// ForeignKey is the 401 for a credential that is not a virtual key (a
// provider's key, say) while a virtual key is required; header names where
// it came (CredentialAuthorization or CredentialAPIKey).
func ForeignKey(requestID, header string) Rejection {
	return Rejection{Status: 401, Type: TypeUnauthorized, RequestID: requestID,
		Message: "not a virtual key: the " + header + " header does not hold a tokentriage virtual key (tt-vk_<12>-<32>), and this gateway requires one; send the key you were given (a provider's own key never goes through it)"}
}

// MalformedKey is the 401 for a credential that starts as a virtual key
// (tt-vk_) but is not one: cut short, extra characters, a character out of
// base62. header names where it came.
func MalformedKey(requestID, header string) Rejection {
	return Rejection{Status: 401, Type: TypeUnauthorized, RequestID: requestID,
		Message: "malformed virtual key in the " + header + " header: it starts with tt-vk_ but is not tt-vk_ followed by 12 and 32 letters or digits joined by -; it may be cut short or carry extra characters: send the key exactly as it was minted"}
}

// The header names ForeignKey and MalformedKey name.
const (
	CredentialAuthorization = "Authorization"
	CredentialAPIKey        = "x-api-key"
)

// RevokedKey is the 401 for a revoked virtual key.
func RevokedKey(requestID, kid string) Rejection {
	return Rejection{Status: 401, Type: TypeUnauthorized, RequestID: requestID,
		Message: "virtual key " + kid + " has been revoked; ask for a new key (tokentriage keys mint)"}
}

// ExpiredKey is the 401 for a virtual key past its expiry (expiresAt,
// Unix seconds): the message names the expiry and the two ways on.
func ExpiredKey(requestID, kid string, expiresAt int64) Rejection {
	at := time.Unix(expiresAt, 0).UTC().Format(time.RFC3339)
	return Rejection{Status: 401, Type: TypeUnauthorized, RequestID: requestID,
		Message: "virtual key " + kid + " expired at " + at + "; rotate it for a new secret with a new expiry (tokentriage keys rotate " + kid +
			" --expires 30d) or mint a new key (tokentriage keys mint)"}
}

// Scope names one of a key's scopes.
type Scope string

// The key scopes a 403 can name.
const (
	ScopeModels           Scope = "models"
	ScopeProviders        Scope = "providers"
	ScopeEndpoints        Scope = "endpoints"
	ScopeAllowPassthrough Scope = "allow_passthrough"
	ScopeCustomers        Scope = "customers"
)

// ScopeDenied is the 403 for a request outside one of the key's scopes:
// value is what the request asked for (the model, the provider, the path),
// allowed the scope's list (unused for allow_passthrough).
func ScopeDenied(requestID, kid string, scope Scope, value string, allowed []string) Rejection {
	var b strings.Builder
	b.WriteString("key ")
	b.WriteString(kid)
	switch scope {
	case ScopeModels:
		b.WriteString(" may not use model ")
	case ScopeProviders:
		b.WriteString(" may not use provider ")
	case ScopeEndpoints:
		b.WriteString(" may not call endpoint ")
	case ScopeCustomers:
		if value == "" {
			b.WriteString(" serves only the customers of its customers scope ")
			b.Write(appendStrings(nil, allowed))
			b.WriteString(", and the request names none; send the customer in the X-Tt-Customer header (or the body's user field)")
			return Rejection{Status: 403, Type: TypeScopeDenied, RequestID: requestID, Message: b.String()}
		}
		b.WriteString(" may not serve customer ")
	default:
		b.WriteString(" may not call ")
		b.Write(jsontok.AppendString(nil, value))
		b.WriteString(": it is not a governed provider endpoint and the key's allow_passthrough scope is false; call a governed endpoint or use a key that allows passthrough")
		return Rejection{Status: 403, Type: TypeScopeDenied, RequestID: requestID, Message: b.String()}
	}
	b.Write(jsontok.AppendString(nil, value))
	b.WriteString(": outside the key's ")
	b.WriteString(string(scope))
	b.WriteString(" scope ")
	b.Write(appendStrings(nil, allowed))
	b.WriteString("; use one it allows, or a key whose scope includes it")
	r := Rejection{Status: 403, Type: TypeScopeDenied, RequestID: requestID, Message: b.String()}
	if scope == ScopeModels {
		r.Param = "model"
	}
	return r
}

// ModelNotFound is the 404 for GET /v1/models/{id} of a model the key
// cannot see: outside its models scope, or of a provider outside its
// providers scope (scope and value say which, allowed is the scope's
// list). A key's model list holds only what its scopes allow, so a model
// outside them is not found, as the provider says of a model it does not
// serve.
func ModelNotFound(requestID, kid, model string, scope Scope, value string, allowed []string) Rejection {
	var b strings.Builder
	b.WriteString("model ")
	b.Write(jsontok.AppendString(nil, model))
	b.WriteString(" is not available to key ")
	b.WriteString(kid)
	b.WriteString(": ")
	if scope == ScopeProviders {
		b.WriteString("its provider ")
		b.Write(jsontok.AppendString(nil, value))
		b.WriteString(" is outside the key's providers scope ")
	} else {
		b.WriteString("it is outside the key's models scope ")
	}
	b.Write(appendStrings(nil, allowed))
	b.WriteString("; GET /v1/models lists the models the key may use")
	return Rejection{Status: 404, Type: TypeNotFound, RequestID: requestID, Message: b.String()}
}

// BadBody is the 400 for a request body the gate cannot read; what says
// what was wrong ("not valid JSON", `field "model" is missing`).
func BadBody(requestID, endpoint, what string) Rejection {
	return Rejection{Status: 400, Type: TypeInvalidRequest, RequestID: requestID,
		Message: "unreadable request body for " + endpoint + ": " + what + "; send the JSON body the provider's API expects"}
}

// BadIdentifier is the 400 for an identifier the caller sent (a model
// name, a customer id, a tag) that is out of its bound: where names where
// it came from ("the X-Tt-Customer header", "the body's user member"),
// problem is govern.IDKind.Check's text, param the body member (for
// OpenAI's param) or "".
func BadIdentifier(requestID, where, problem, param string) Rejection {
	return Rejection{Status: 400, Type: TypeInvalidRequest, RequestID: requestID, Param: param,
		Message: where + ": " + problem + "; send an identifier within that bound"}
}

// EncodedBody is the 415 for a governed request whose body is compressed:
// the gate reads the body (model, prompt, max_tokens) to govern it.
func EncodedBody(requestID, endpoint, encoding string) Rejection {
	return Rejection{Status: 415, Type: TypeInvalidRequest, RequestID: requestID,
		Message: "request body for " + endpoint + " is sent with content-encoding " + strconv.Quote(encoding) +
			"; this gateway reads the body to govern the call: send it uncompressed"}
}

// TooLarge is the 413 for a body over the gate's buffering cap.
func TooLarge(requestID string, capBytes int64) Rejection {
	return Rejection{Status: 413, Type: TypeRequestTooLarge, RequestID: requestID,
		Message: "request body is larger than this gateway's cap of " + strconv.FormatInt(capBytes, 10) +
			" bytes; shorten the request, or raise the filter's body cap"}
}

// Uncheckable is the 503 for a limit that cannot be checked while it is
// fail: closed with enforce: hard; why says why (NoSnapshot,
// StaleSnapshot(…), or the store's failure).
func Uncheckable(requestID, limitID string, limitType LimitType, node, why string) Rejection {
	return Rejection{Status: 503, Type: TypeLimitUnavailable, RequestID: requestID, LimitID: limitID,
		Message: "limit " + limitID + " (" + string(limitType) + ") at " + node + " cannot be checked: " + why +
			"; it is fail: closed with enforce: hard, so requests it governs are refused until it can be checked again"}
}

// NoSnapshot is why a LedgerSettled limit is uncheckable before the first
// snapshot arrives.
const NoSnapshot = "no counter snapshot has arrived from the accountant yet"

// StaleSnapshot is why a LedgerSettled limit is uncheckable when the
// snapshot is older than the gate trusts.
func StaleSnapshot(age, trusted time.Duration) string {
	return "the accountant's snapshot is " + strconv.FormatInt(int64(age/time.Second), 10) +
		"s old, older than the " + strconv.FormatInt(int64(trusted/time.Second), 10) + "s the gate trusts"
}

// NotFound is the 404 for an unknown path under /tt/.
func NotFound(requestID, path string) Rejection {
	return Rejection{Status: 404, Type: TypeNotFound, RequestID: requestID,
		Message: "no tokentriage endpoint at " + path + "; the gateway answers GET /tt/v1/me"}
}

// MethodNotAllowed is the 405 for a known /tt/ path called with the wrong
// method; allow lists the methods it answers ("GET").
func MethodNotAllowed(requestID, method, path, allow string) Rejection {
	return Rejection{Status: 405, Type: TypeMethodNotAllowed, RequestID: requestID, Allow: allow,
		Message: method + " " + path + " is not supported; use " + allow}
}

// TypeGatewayError is the error.type of a request the gateway could not
// prepare for the provider.
const TypeGatewayError = "gateway_error"

// EditFailed is the 500 for a request whose edits the host refused (the
// virtual key's header, the length header, the body the gate rewrote):
// sent on half edited, it would carry the key to the provider or a length
// that does not match its body, so it is not sent at all.
func EditFailed(requestID, what, cause string) Rejection {
	return Rejection{Status: 500, Type: TypeGatewayError, RequestID: requestID,
		Message: "the gateway could not prepare this request for the provider (" + what + " failed: " + cause + "), so it was not sent; retry it, and tell the gateway's operator if it keeps failing"}
}

// EndpointVariant is the 400 for a request that spells a governed endpoint
// otherwise (escaped, in other letter case, with path parameters, its
// method in lower case, or a method override header naming POST), which a
// server on the way may route as that endpoint: the gateway governs the
// canonical spelling and refuses the others rather than let them through
// ungoverned.
func EndpointVariant(requestID, method, override, rawPath, canonical string, methodOnly bool) Rejection {
	msg := "the path " + strconv.Quote(rawPath) + " is another spelling (escaped, in other letter case or with ;parameters) of the governed endpoint " + canonical +
		", which this gateway does not accept; send the request to " + canonical + " (after your route prefix, if any), spelled plainly"
	switch {
	case override != "":
		msg = "a method override header (" + strconv.Quote(override) + ") on a " + strconv.Quote(method) + " to the governed endpoint " + canonical +
			" is not accepted, since a server that honours it would run a generation this gateway let through ungoverned; send POST without the override"
	case methodOnly:
		msg = "the method " + strconv.Quote(method) + " is another spelling of POST for the governed endpoint " + canonical + ", which this gateway does not accept; send POST"
	}
	return Rejection{Status: 400, Type: TypeInvalidRequest, RequestID: requestID, Message: msg}
}
