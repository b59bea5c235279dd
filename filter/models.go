package filter

import (
	"net/url"
	"strings"

	"github.com/tokentriage/tokentriage/shared/jsontok"
	"github.com/tokentriage/tokentriage/shared/jsontok/jv"
	"github.com/tokentriage/tokentriage/shared/llm"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// Free endpoints are provider calls that spend nothing: the model list
// (GET /v1/models, /v1/models/{id}: OpenAI's and Anthropic's, told apart by
// the upstream's answer) and Anthropic's token count (POST
// /v1/messages/count_tokens). Many clients call them before anything else,
// so every authenticated key may: they need no allow_passthrough, and
// count_tokens goes with /v1/messages in an endpoints scope. They write no
// ledger row, so no spend or quota counts them; rate and concurrency
// limits count them as they count every request the gateway forwards. The
// list a key gets holds only the models its scope allows: the upstream's
// answer is filtered, and a model outside the scope, or a provider outside
// the key's providers scope, is not found.
type freeKind uint8

const (
	freeNone freeKind = iota
	freeModels
	freeModel // one model: its id is Stream.freeID
	freeCountTokens
)

// freeEndpointOf classifies a request's method and cleaned path (raw is
// the path as received, which is what goes upstream); id is the model of
// GET /v1/models/{id}, unescaped (an id may hold "/").
//
// A free endpoint is let through with no allow_passthrough, so only a path
// that every server on the way reads as that endpoint is one: the path as
// received holds no "." or ".." segment (it is forwarded as it came, and
// /v1/files/x/../../models is the model list only to a server that
// resolves dot segments), the route prefix before /v1/… holds no escape,
// path parameter or backslash, and the id, unescaped, no dot segment ("."
// or "..", also as %2e%2e), path parameter, backslash, "?", "#" or NUL.
// Otherwise a server that decodes or normalizes the path, or one that does
// not, would route GET /v1/models/%2e%2e/files, /v1/files;/v1/models or
// /v1/files/x/../../models to another of the provider's endpoints,
// ungoverned and past the key's passthrough scope. Such a path is a
// passthrough call.
func freeEndpointOf(method, path, raw string) (kind freeKind, id string) {
	kind, id = freeKindOf(method, path)
	if kind != freeNone && hasDotSegment(raw) {
		return freeNone, ""
	}
	return kind, id
}

// hasDotSegment reports whether a path (its query aside) holds a "." or
// ".." segment.
func hasDotSegment(p string) bool {
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// freeKindOf classifies a request's method and cleaned path, as
// freeEndpointOf, the path as received aside.
func freeKindOf(method, path string) (kind freeKind, id string) {
	const models, countTokens = "/v1/models", "/v1/messages/count_tokens"
	switch method {
	case "GET", "HEAD":
		if strings.HasSuffix(path, models) {
			if !plainPrefix(path[:len(path)-len(models)]) {
				return freeNone, ""
			}
			return freeModels, ""
		}
		if i := strings.Index(path, models+"/"); i >= 0 {
			raw := path[i+len(models)+1:]
			if id, err := url.PathUnescape(raw); err == nil && id != "" && plainPrefix(path[:i]) && plainModelID(id) {
				return freeModel, id
			}
		}
	case "POST":
		if strings.HasSuffix(path, countTokens) && plainPrefix(path[:len(path)-len(countTokens)]) {
			return freeCountTokens, ""
		}
	}
	return freeNone, ""
}

// plainPrefix reports whether a route prefix holds nothing a server may
// decode into another path: no escape, path parameter or backslash.
func plainPrefix(p string) bool {
	return !strings.ContainsAny(p, "%;\\")
}

// plainModelID reports whether an unescaped model id stays one: no path
// parameter, backslash, query, fragment or NUL, and no "." or ".." segment
// that would climb out of /v1/models.
func plainModelID(id string) bool {
	return !strings.ContainsAny(id, ";\\?#\x00") && !hasDotSegment(id)
}

// checkFree applies a key's scopes to a free endpoint: nil to let it go on
// (with the list to be filtered), or the answer. The endpoints and
// allow_passthrough scopes do not apply to the model list.
func (e *Engine) checkFree(s *Stream, v Verdict) *Verdict {
	sc := s.scopes
	if sc == nil {
		return nil
	}
	switch s.free {
	case freeCountTokens:
		if sc.Endpoints != nil && !contains(sc.Endpoints, llm.Messages.String()) {
			r := e.reject(s, v, wire.ScopeDenied(s.id, s.kid, wire.ScopeEndpoints, s.path, sc.Endpoints))
			return &r
		}
		if sc.Providers != nil && !contains(sc.Providers, s.dims.Provider) {
			r := e.reject(s, v, wire.ScopeDenied(s.id, s.kid, wire.ScopeProviders, s.dims.Provider, sc.Providers))
			return &r
		}
	case freeModel:
		switch {
		case sc.Providers != nil && !contains(sc.Providers, s.dims.Provider):
			r := e.reject(s, v, wire.ModelNotFound(s.id, s.kid, s.freeID, wire.ScopeProviders, s.dims.Provider, sc.Providers))
			return &r
		case sc.Models != nil && !modelAllowed(sc.Models, s.freeID):
			r := e.reject(s, v, wire.ModelNotFound(s.id, s.kid, s.freeID, wire.ScopeModels, s.freeID, sc.Models))
			return &r
		}
	case freeModels:
		if sc.Providers != nil && !contains(sc.Providers, s.dims.Provider) {
			// No model of this provider is the key's: the empty list, as
			// the provider would shape it.
			s.replied, s.status = true, 200
			v.Action = ActReply
			v.Reply = &Reply{Status: 200, Headers: wire.RequestIDHeaders([][2]string{{wire.HeaderContentType, "application/json"}}, s.id),
				Body: emptyModelList(s.shape == wire.ShapeAnthropic), Details: "tokentriage_models"}
			return &v
		}
		s.modelScope = sc.Models // nil: the whole list is the key's
	}
	return nil
}

// emptyModelList is a list of no models in OpenAI's or Anthropic's shape.
func emptyModelList(anthropic bool) []byte {
	if anthropic {
		return []byte(`{"data":[],"has_more":false,"first_id":null,"last_id":null}`)
	}
	return []byte(`{"object":"list","data":[]}`)
}

// filterModelList keeps, of a model list (OpenAI's {"object":"list",
// "data":[…]} or Anthropic's {"data":[…],"has_more":…,"first_id":…,
// "last_id":…}), the entries whose id the patterns allow; everything else
// is kept as the upstream wrote it, Anthropic's paging cursors included
// (they page the upstream's list). A body that is not such a list comes
// back unchanged, with ok false; one nested deeper than the filter reads
// (jsontok.DefaultMaxDepth) comes back nil, with ok false. The body is
// checked with the tokenizer, whose nesting is a bit stack: gjson's check
// recursed once per level, and an upstream's megabyte of '[' overflowed
// the guest's call stack, a trap that took the VM down.
func filterModelList(body []byte, patterns []string) (out []byte, ok bool) {
	switch jsontok.Valid(body, jsontok.GJSON).Code {
	case jsontok.ErrNone:
	case jsontok.ErrDepth:
		return nil, false
	default:
		return body, false
	}
	data := jv.GetBytes(body, "data")
	if !data.IsArray() || data.Index <= 0 || data.Index+len(data.Raw) > len(body) {
		return body, false
	}
	out = make([]byte, 0, len(body))
	out = append(out, body[:data.Index]...)
	out = append(out, '[')
	n := 0
	data.ForEach(func(_, m jv.Value) bool {
		if id := m.Get("id"); id.Type == jv.String && modelAllowed(patterns, id.Str) {
			if n > 0 {
				out = append(out, ',')
			}
			out = append(out, m.Raw...)
			n++
		}
		return true
	})
	out = append(out, ']')
	return append(out, body[data.Index+len(data.Raw):]...), true
}

// modelListBody is the list a key with a models scope receives, from the
// upstream's whole answer: filtered, or, when it cannot be read (over the
// copy cap, compressed, nested past the bound), the empty list: never a
// model outside the scope.
func modelListBody(s *Stream, body []byte, readable bool) []byte {
	if readable && len(body) <= maxJSONCopy {
		out, ok := filterModelList(body, s.modelScope)
		switch {
		case ok:
			return out
		case out != nil:
			return body // not a list: an answer of another kind, passed on
		}
	}
	return emptyModelList(s.shape == wire.ShapeAnthropic)
}
