package govern

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/tokentriage/tokentriage/shared/llm"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// ScopeProblem is one reason a key's scope would match no request: Field
// names it within the scopes (models, providers[1], endpoints[0]).
type ScopeProblem struct {
	Field, Message string
}

// ScopeProblems checks a key's scopes, minted through the management API
// or written in a plugin configuration: an empty list, a model pattern
// path.Match cannot read, an empty or miscased provider name, and an
// endpoint other than a governed one as the gateway names it would each
// refuse the key on every call.
func ScopeProblems(sc vkey.Scopes) []ScopeProblem {
	var out []ScopeProblem
	add := func(field, format string, args ...any) {
		out = append(out, ScopeProblem{field, fmt.Sprintf(format, args...)})
	}
	for _, list := range []struct {
		name  string
		items []string
	}{{"models", sc.Models}, {"providers", sc.Providers}, {"endpoints", sc.Endpoints}, {"customers", sc.Customers}} {
		if list.items != nil && len(list.items) == 0 {
			one := strings.TrimSuffix(list.name, "s")
			add(list.name, "an empty list allows no %s at all; omit it (or write null) to allow every %s, or list the ones the key may use", one, one)
		}
	}
	for j, m := range sc.Models {
		at := "models[" + strconv.Itoa(j) + "]"
		if m == "" {
			add(at, "an empty pattern matches no model; omit the list to allow every model")
		} else if _, err := path.Match(m, ""); err != nil {
			add(at, "malformed pattern %q: %v (patterns use Go's path.Match, where * does not cross a /)", m, err)
		}
	}
	for j, c := range sc.Customers {
		at := "customers[" + strconv.Itoa(j) + "]"
		switch _, err := path.Match(c, ""); {
		case c == "":
			add(at, "an empty pattern matches no customer; omit the list to allow every customer")
		case err != nil:
			add(at, "malformed pattern %q: %v (patterns use Go's path.Match: * matches any run of characters but /)", c, err)
		default:
			for i := 0; i < len(c); i++ {
				if ch := c[i]; !strings.ContainsRune(`*?[]\^-`, rune(ch)) && !CustomerID.allows(ch) {
					add(at, "%q never matches: it %s", c, CustomerID.charsetProblem(c, i))
					break
				}
			}
		}
	}
	for j, p := range sc.Providers {
		at := "providers[" + strconv.Itoa(j) + "]"
		switch {
		case strings.TrimSpace(p) == "":
			add(at, "an empty entry matches no provider; omit the list to allow every provider")
		case !ProviderNameOK(p):
			add(at, "%q never matches: provider names are lowercase letters, digits, '-', '_' and '.', compared exactly; write %q", p, strings.ToLower(strings.TrimSpace(p)))
		}
	}
	for j, e := range sc.Endpoints {
		at := "endpoints[" + strconv.Itoa(j) + "]"
		canon := llm.EndpointOf(e)
		switch {
		case !strings.HasPrefix(e, "/"):
			add(at, "%q is not a request path; write it with a leading /, e.g. /v1/chat/completions", e)
		case canon == llm.Unknown:
			add(at, "%q is not a governed provider endpoint, so no request would match it; an endpoint scope is one of %s (other paths, such as GET /v1/models, are let through by allow_passthrough)", e, strings.Join(GovernedEndpoints(), ", "))
		case canon.String() != e:
			add(at, "%q never matches: a request to a governed endpoint is matched by its canonical path, whatever route prefix it was sent under; write %q", e, canon.String())
		}
	}
	return out
}

// GovernedEndpoints are the values an endpoints scope may hold: the
// canonical paths of the governed provider endpoints, which is what a
// request's endpoint is compared as.
func GovernedEndpoints() []string {
	var out []string
	for e := llm.ChatCompletions; e <= llm.Messages; e++ {
		out = append(out, e.String())
	}
	return out
}

// InferredProviders are the provider names the gateway gives a request its
// providers mapping does not name: anthropic on /v1/messages, openai on
// every other path.
var InferredProviders = []string{"openai", "anthropic"}
