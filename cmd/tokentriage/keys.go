package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/vkey"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// defaultAccountant is where keys commands find the accountant.
const defaultAccountant = "http://127.0.0.1:8791"

const keysAuthHelp = `
The accountant is reached at --accountant (default ` + defaultAccountant + `).
The admin token comes from --admin-token-file when given, else from the
TT_ADMIN_TOKEN environment variable. Exit status: 0 done, 1 the accountant
refused or could not be reached, 2 usage error.`

var keysMintCmd = &command{
	name:    "keys mint",
	usage:   "--owner NODE [--models a,b] [...]",
	summary: "mint a virtual key; the key alone on stdout, its details on stderr",
	help: `
Mints a virtual key owned by NODE, a node of the tenancy tree (declared in
the config's tenants or created through the management API). The key is
printed alone on the first line of stdout and never shown again; its kid,
owner and scopes go to stderr, so a script can keep the key:

  KEY=$(tokentriage keys mint --owner org:acme/team:ml/user:dev1)

Scopes restrict what the key may call; a scope left out is unrestricted.
--models takes path.Match patterns (gpt-4o*), --providers and --endpoints
exact values. An endpoint is one of /v1/chat/completions, /v1/completions,
/v1/embeddings, /v1/responses, /v1/messages; any other is refused. A
provider is the name the gateway gives a request: openai or anthropic by
path, or a name of the filter's providers mapping, which the accountant
cannot see, so any other name is minted with a warning to check it.
--customers takes path.Match patterns (acme-*) the request's customer
(X-Tt-Customer, or the body's user field) must match: such a key serves
no request that names no customer.

--override LIMIT=AMOUNT sets the key's own amount of a key-level limit
(attach: { level: key }) of type budget_usd (AMOUNT in dollars: 5, 0.25),
quota_tokens or quota_requests (a count), within the ceiling its
override: { allow: true, max_amount… } declares; repeat it for several.
The overrides are written with the key, audited, and enforced from the
filters' next sync; one the accountant refuses refuses the whole mint.

--name gives the key a name, unique among its owner's live keys, shown
beside its kid in keys list, spend reports, the dashboard and /tt/v1/me.
--expires gives it a lifetime (30d, 2w, 12h) or an RFC 3339 time; past it
the gateway refuses the key with a 401 naming the expiry. Leave it out
for a key that never expires.` + keysAuthHelp,
	setup: func(fs *pflag.FlagSet) func(*env) int {
		c := accountantFlags(fs)
		owner := fs.String("owner", "", "node the key belongs to, e.g. org:acme/team:ml/user:dev1 (required)")
		models := fs.StringSlice("models", nil, "model patterns the key may request (comma-separated; default any)")
		providers := fs.StringSlice("providers", nil, "providers the key may reach (comma-separated; default any)")
		endpoints := fs.StringSlice("endpoints", nil, "endpoints the key may call, e.g. /v1/chat/completions (comma-separated; default any)")
		customers := fs.StringSlice("customers", nil, "customer patterns the key may serve, e.g. acme-* (comma-separated; default any, and requests naming none)")
		pass := fs.Bool("allow-passthrough", false, "let the key call paths that are not a governed provider endpoint")
		overrides := fs.StringArray("override", nil, "LIMIT=AMOUNT: the key's own amount of a key-level spend or quota limit (dollars for budget_usd); repeatable")
		name := fs.String("name", "", "the key's name, unique among its owner's live keys")
		expires := fs.String("expires", "", "when the key expires: a lifetime (30d, 2w, 12h) or an RFC 3339 time (default never)")
		return func(e *env) int {
			if *owner == "" {
				return e.failf(2, "--owner NODE is required")
			}
			if len(e.args) > 0 {
				return e.failf(2, "unexpected argument %q", e.args[0])
			}
			sc := vkey.Scopes{AllowPassthrough: *pass}
			for _, l := range []struct {
				flag string
				in   []string
				out  *[]string
			}{{"models", *models, &sc.Models}, {"providers", *providers, &sc.Providers}, {"endpoints", *endpoints, &sc.Endpoints}, {"customers", *customers, &sc.Customers}} {
				if fs.Changed(l.flag) && len(l.in) == 0 {
					return e.failf(2, "--%s needs at least one value; leave it out to allow any", l.flag)
				}
				*l.out = l.in
			}
			client, code := c.client(e)
			if client == nil {
				return code
			}
			req := api.MintRequest{Owner: *owner, Name: *name, Scopes: sc}
			if code := expiresFlag(e, *expires, &req.ExpiresAt, &req.ExpiresIn); code != 0 {
				return code
			}
			if len(*overrides) > 0 {
				var code int
				if req.Overrides, code = keyOverrides(e, c, client, *overrides); code != 0 {
					return code
				}
			}
			k, err := client.Mint(e.ctx, req)
			if err != nil {
				return c.fail(e, err)
			}
			fmt.Fprintln(e.stdout, k.Key)
			fmt.Fprintf(e.stderr, "minted %s%s for %s\n  scopes: %s\n", k.KID, nameText(k.Name), k.Owner, scopesText(k.Scopes))
			if k.ExpiresAt != nil {
				fmt.Fprintf(e.stderr, "  expires: %s\n", k.ExpiresAt.UTC().Format(time.RFC3339))
			}
			fmt.Fprintf(e.stderr, "  %s\n", k.Note)
			for _, o := range k.Overrides {
				fmt.Fprintf(e.stderr, "  override: %s at %s = %s (%s)\n", o.LimitID, o.Node, overrideText(o), o.State)
			}
			for _, w := range k.Warnings {
				fmt.Fprintf(e.stderr, "  warning: %s\n", w)
			}
			return 0
		}
	},
}

// expiresFlag reads --expires: a lifetime (30d) into in, an RFC 3339
// time into at, "never" as a lifetime; nothing when empty.
func expiresFlag(e *env, v string, at **time.Time, in *string) int {
	if v == "" {
		return 0
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		*at = &t
		return 0
	}
	if v != "never" {
		if _, err := api.ParseLifetime(v); err != nil {
			return e.failf(2, "--expires %s: %v, or an RFC 3339 time such as 2026-12-31T00:00:00Z", v, err)
		}
	}
	*in = v
	return 0
}

// nameText is " (NAME)" for a named key, "" otherwise.
func nameText(name string) string {
	if name == "" {
		return ""
	}
	return fmt.Sprintf(" (%s)", name)
}

// keyOverrides reads --override LIMIT=AMOUNT values into the mint request's
// overrides, reading each limit's type from the accountant's armed limits
// (a budget_usd amount is dollars, a quota's a count).
func keyOverrides(e *env, c *accountantConn, client *api.Client, values []string) ([]api.KeyOverride, int) {
	defs, err := client.Limits(e.ctx)
	if err != nil {
		return nil, c.fail(e, err)
	}
	types := map[string]string{}
	var keyLevel []string
	for _, d := range defs {
		types[d.LimitID] = d.LimitType
		if d.Level == "key" {
			keyLevel = append(keyLevel, d.LimitID)
		}
	}
	out := make([]api.KeyOverride, 0, len(values))
	for _, v := range values {
		id, amount, ok := strings.Cut(v, "=")
		if !ok || id == "" || amount == "" {
			return nil, e.failf(2, "--override %q: write LIMIT=AMOUNT, e.g. --override key_daily=5", v)
		}
		t, known := types[id]
		if !known {
			return nil, e.failf(1, "--override %q: no limit %q is armed; the key-level limits are %s", v, id, listOrNone(keyLevel))
		}
		o := api.KeyOverride{LimitID: id}
		if t == "budget_usd" {
			n, err := wire.ParseUSD(strings.TrimPrefix(amount, "$"))
			if err != nil {
				return nil, e.failf(2, "--override %q: limit %s is budget_usd, so AMOUNT is dollars (5, 0.25): %v", v, id, err)
			}
			o.AmountUSD = &config.USD{Nanos: n}
		} else {
			n, err := strconv.ParseInt(amount, 10, 64)
			if err != nil {
				return nil, e.failf(2, "--override %q: limit %s is %s, so AMOUNT is a whole count", v, id, t)
			}
			o.Amount = &n
		}
		out = append(out, o)
	}
	return out, 0
}

func listOrNone(ids []string) string {
	if len(ids) == 0 {
		return "none (a key's own override is of a limit with attach: { level: key })"
	}
	return strings.Join(ids, ", ")
}

// overrideText is an override's amount as the API shows it.
func overrideText(o api.OverrideView) string {
	switch {
	case o.Amount != nil:
		return "$" + string(o.Amount.USD)
	case o.AmountCount != nil:
		return strconv.FormatInt(*o.AmountCount, 10)
	}
	return "?"
}

var keysListCmd = &command{
	name:    "keys list",
	usage:   "[--owner NODE]",
	summary: "list minted keys (kids, owners, scopes; never the keys)",
	help: `
Lists the keys owned by NODE or a node below it (every key when --owner is
left out), one a line: kid, name, owner, state (live, expired or revoked),
when it expires, when it was created and by whom, and its scopes.` + keysAuthHelp,
	setup: func(fs *pflag.FlagSet) func(*env) int {
		c := accountantFlags(fs)
		owner := fs.String("owner", "", "list the keys of this node and the nodes below it")
		return func(e *env) int {
			if len(e.args) > 0 {
				return e.failf(2, "unexpected argument %q", e.args[0])
			}
			client, code := c.client(e)
			if client == nil {
				return code
			}
			keys, err := client.ListKeys(e.ctx, *owner)
			if err != nil {
				return c.fail(e, err)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KID\tNAME\tOWNER\tSTATE\tEXPIRES\tCREATED\tBY\tSCOPES")
			for _, k := range keys {
				name, expires := k.Name, "never"
				if name == "" {
					name = "-"
				}
				if k.ExpiresAt != nil {
					expires = k.ExpiresAt.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.KID, name, k.Owner, keyState(k), expires,
					k.CreatedAt.UTC().Format(time.RFC3339), k.CreatedBy, scopesText(k.Scopes))
			}
			tw.Flush()
			return 0
		}
	},
}

var keysRevokeCmd = &command{
	name:    "keys revoke",
	usage:   "KID",
	summary: "revoke a virtual key by its kid",
	help: `
Revokes the key KID (vk_ followed by 12 letters and digits, as keys list
shows it). Filters refuse it from their next sync on.` + keysAuthHelp,
	setup: func(fs *pflag.FlagSet) func(*env) int {
		c := accountantFlags(fs)
		return func(e *env) int {
			if len(e.args) != 1 {
				return e.failf(2, "one KID is required (keys list shows them)")
			}
			client, code := c.client(e)
			if client == nil {
				return code
			}
			k, err := client.RevokeKey(e.ctx, e.args[0])
			if err != nil {
				return c.fail(e, err)
			}
			fmt.Fprintf(e.stdout, "revoked %s (owner %s) at %s\n", k.KID, k.Owner, k.RevokedAt.UTC().Format(time.RFC3339))
			return 0
		}
	},
}

var keysRotateCmd = &command{
	name:    "keys rotate",
	usage:   "KID [--grace 24h] [--expires 30d]",
	summary: "give a key a new secret under the same kid; the new key alone on stdout",
	help: `
Rotates the key KID: a new secret under the same kid, so the key keeps its
name, owner, scopes, limits, counters and spend history. The new key is
printed alone on stdout and never shown again. The previous secret keeps
working for --grace (default 24h, at most 7d; 0s ends it at once), long
enough to roll the new one out; a secret before that stops now.

--expires gives the rotated key a new lifetime (30d, 2w, 12h, an RFC 3339
time, or never); left out, the key keeps its expiry. An expired key is
rotated only with a new one. A revoked key is not rotated.` + keysAuthHelp,
	setup: func(fs *pflag.FlagSet) func(*env) int {
		c := accountantFlags(fs)
		grace := fs.String("grace", "", "how long the previous secret keeps working (default 24h; 0s: not at all)")
		expires := fs.String("expires", "", "a new expiry: a lifetime (30d), an RFC 3339 time, or never (default: keep the current one)")
		return func(e *env) int {
			if len(e.args) != 1 {
				return e.failf(2, "one KID is required (keys list shows them)")
			}
			req := api.RotateRequest{Grace: *grace}
			if *grace != "" {
				if _, err := api.ParseLifetime(*grace); err != nil {
					return e.failf(2, "--grace %s: %v", *grace, err)
				}
			}
			if code := expiresFlag(e, *expires, &req.ExpiresAt, &req.ExpiresIn); code != 0 {
				return code
			}
			client, code := c.client(e)
			if client == nil {
				return code
			}
			k, err := client.RotateKey(e.ctx, e.args[0], req)
			if err != nil {
				return c.fail(e, err)
			}
			fmt.Fprintln(e.stdout, k.Key)
			fmt.Fprintf(e.stderr, "rotated %s%s (owner %s)\n", k.KID, nameText(k.Name), k.Owner)
			if k.PreviousUntil != nil {
				fmt.Fprintf(e.stderr, "  the previous secret works until %s\n", k.PreviousUntil.UTC().Format(time.RFC3339))
			} else {
				fmt.Fprintln(e.stderr, "  the previous secret stopped working now")
			}
			if k.ExpiresAt != nil {
				fmt.Fprintf(e.stderr, "  expires: %s\n", k.ExpiresAt.UTC().Format(time.RFC3339))
			}
			fmt.Fprintf(e.stderr, "  %s\n", k.Note)
			return 0
		}
	},
}

// accountantConn holds the flags every keys command shares.
type accountantConn struct {
	url       *string
	tokenFile *string
}

func accountantFlags(fs *pflag.FlagSet) *accountantConn {
	return &accountantConn{
		url:       fs.String("accountant", defaultAccountant, "the accountant's address"),
		tokenFile: fs.String("admin-token-file", "", "file holding the admin token (default: the TT_ADMIN_TOKEN environment variable)"),
	}
}

// client returns a management API client, or nil and the exit status after
// saying why there is none.
func (c *accountantConn) client(e *env) (*api.Client, int) {
	return adminClient(e, *c.url, *c.tokenFile)
}

// readToken is the what token (admin, internal) of file, trimmed, or of
// the environment variable env when file is empty. A file that cannot be
// read, or holds nothing, is an error; an unset variable is "".
func readToken(what, env, file string) (string, error) {
	if file == "" {
		return os.Getenv(env), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("cannot read the %s token: %v", what, err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("the %s token file %s is empty", what, file)
	}
	return token, nil
}

// adminClient returns a management API client for the accountant at url
// with the admin token of tokenFile, or of TT_ADMIN_TOKEN when tokenFile is
// empty; or nil and the exit status after saying why there is none.
func adminClient(e *env, url, tokenFile string) (*api.Client, int) {
	token, err := readToken("admin", "TT_ADMIN_TOKEN", tokenFile)
	if err != nil {
		return nil, e.failf(2, "%v", err)
	}
	if token == "" {
		return nil, e.failf(2, "no admin token: set TT_ADMIN_TOKEN, or pass --admin-token-file FILE")
	}
	return &api.Client{BaseURL: url, Token: token, HTTP: &http.Client{Timeout: 30 * time.Second}}, 0
}

// fail reports an error from the accountant and returns exit status 1.
func (c *accountantConn) fail(e *env, err error) int {
	var ae *api.Error
	switch {
	case api.IsUnauthorized(err):
		errors.As(err, &ae)
		return e.failf(1, "the accountant at %s refused the token: %s", *c.url, ae.Message)
	case errors.As(err, &ae):
		return e.failf(1, "%s (HTTP %d %s)", ae.Message, ae.Status, ae.Type)
	}
	return e.failf(1, "%v", err)
}

func keyState(k api.KeyView) string {
	if k.RevokedAt != nil {
		return "revoked " + k.RevokedAt.UTC().Format(time.RFC3339)
	}
	return k.State
}

// scopesText renders scopes on one line: "models gpt-4o*; providers any; …".
func scopesText(s vkey.Scopes) string {
	list := func(v []string) string {
		if v == nil {
			return "any"
		}
		return strings.Join(v, ",")
	}
	pass := "no"
	if s.AllowPassthrough {
		pass = "yes"
	}
	return fmt.Sprintf("models %s; providers %s; endpoints %s; passthrough %s", list(s.Models), list(s.Providers), list(s.Endpoints), pass)
}
