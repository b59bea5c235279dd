package devserver

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/tokentriage/tokentriage/wasmtest"
)

// providerTransport carries the gateway's requests to a real provider. It
// is the proxy's side of the provider credential: every header a client
// can carry a credential in (ClientCredentialHeaders) is dropped (the
// filter strips a virtual key, but a client may send anything), and the
// provider key from the environment is added, Anthropic's as x-api-key on /v1/messages and
// OpenAI's as a bearer token on every other path. It also asks for an
// uncompressed answer (the filter reads usage from the body) and sends the
// provider's own host name instead of the gateway's.
type providerTransport struct {
	next              http.RoundTripper
	basePath          string
	openAI, anthropic string
}

var _ http.RoundTripper = (*providerTransport)(nil)

func newProviderTransport(base, openAI, anthropic string, next http.RoundTripper) (*providerTransport, error) {
	u, err := CheckUpstream(base)
	if err != nil {
		return nil, fmt.Errorf("devserver: %w", err)
	}
	if next == nil {
		next = wasmtest.NewProxyTransport()
	}
	return &providerTransport{
		next:      next,
		basePath:  strings.TrimSuffix(u.Path, "/"),
		openAI:    openAI,
		anthropic: anthropic,
	}, nil
}

// CheckUpstream parses a URL upstream: an http or https base URL with a
// host and no query or fragment. The gateway forwards a request's whole
// path (/v1/chat/completions) after the base URL's path, so a base URL that
// already ends in /v1 (an SDK's base URL, https://api.openai.com/v1) would
// send /v1/v1/chat/completions; it is refused with the base URL to write.
func CheckUpstream(base string) (*url.URL, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("upstream %q: write %q for the built-in stub, or a provider base URL such as https://api.openai.com", base, UpstreamStub)
	}
	if p := strings.TrimRight(u.Path, "/"); p == "/v1" || strings.HasSuffix(p, "/v1") {
		fixed := *u
		fixed.Path, fixed.RawPath = strings.TrimSuffix(p, "/v1"), ""
		return nil, fmt.Errorf("upstream %q: the gateway adds each request's own path (/v1/chat/completions) after the base URL, so this one would send /v1/v1/chat/completions; "+
			"pass the base URL without /v1: %s", base, fixed.String())
	}
	return u, nil
}

// ClientCredentialHeaders are the request headers a provider or a browser
// reads a credential from: OpenAI's and every bearer scheme's
// Authorization, Anthropic's x-api-key, Azure OpenAI's api-key, Google's
// x-goog-api-key, a proxy's Proxy-Authorization and cookies. The proxy
// drops each of them from a client's request before it adds the provider
// key, and with them every header whose name says it carries a credential
// (CredentialHeader: X-Forwarded-Authorization, X-Auth-Token,
// X-Amz-Security-Token, ...), so no client credential reaches a URL
// upstream. Other headers (OpenAI-Organization, Anthropic-Version, ...)
// pass unchanged.
var ClientCredentialHeaders = []string{
	"Authorization",
	"Proxy-Authorization",
	"X-Api-Key",
	"Api-Key",
	"X-Goog-Api-Key",
	"Cookie",
}

// credentialWords are the parts of a header name that mark it as a
// credential's carrier: an intermediary's copy of the caller's
// credentials (X-Forwarded-Authorization, X-Original-Authorization,
// X-Forwarded-Access-Token, X-Auth-Request-Access-Token), a scheme of
// its own (X-Auth-Token, X-Access-Token, X-Amz-Security-Token,
// X-Serverless-Authorization, Cf-Access-Jwt-Assertion), keys under
// other spellings (X-Api-Key's cousins Apikey, X-Api_Key, Ocp-Apim-
// Subscription-Key), secrets, passwords and sessions.
var credentialWords = []string{"auth", "token", "api-key", "api_key", "apikey", "subscription-key",
	"cookie", "secret", "password", "passwd", "credential", "session", "jwt", "signature"}

// CredentialHeader reports whether a request header named name may carry a
// client's credential: one of ClientCredentialHeaders, or a name holding
// one of credentialWords (ASCII case ignored).
func CredentialHeader(name string) bool {
	n := strings.ToLower(name)
	for _, w := range credentialWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	for _, c := range ClientCredentialHeaders {
		if strings.EqualFold(name, c) {
			return true
		}
	}
	return false
}

// AnthropicPath is the path prefix whose requests carry Anthropic's key.
const AnthropicPath = "/v1/messages"

func (t *providerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	h := out.Header
	for name := range h {
		if CredentialHeader(name) {
			delete(h, name)
		}
	}
	h.Del("Accept-Encoding")
	path := strings.TrimPrefix(out.URL.Path, t.basePath)
	switch {
	case path == AnthropicPath || strings.HasPrefix(path, AnthropicPath+"/"):
		if t.anthropic != "" {
			h.Set("X-Api-Key", t.anthropic)
		}
	case t.openAI != "":
		h.Set("Authorization", "Bearer "+t.openAI)
	}
	out.Host = ""
	return t.next.RoundTrip(out)
}
