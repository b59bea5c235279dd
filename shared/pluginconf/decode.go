package pluginconf

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// Defaults of the plugin configuration.
const (
	DefaultSyncInterval  = "1s"
	DefaultFlushInterval = "500ms"
	DefaultMaxBodyBytes  = 8 << 20
	DefaultLeaseTTL      = "15m"
	DefaultTimeoutMS     = 2000
)

// Decode reads the plugin configuration: strict JSON (an unknown field is
// an error naming the known ones), defaults applied, then validated: the
// durations, an accountant cluster when no governance block is embedded,
// the provider rules, the static keys (kid, hash and owner shapes), and the
// embedded governance block compiled in full, so every boot-time guard
// fires here. The compiled plan is kept in Plan. The error is a
// *config.SyntaxError for JSON that does not parse, or a govern.Problems
// listing every problem with its path. Empty input reads as {}.
func Decode(b []byte) (*Config, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}")
	}
	tree, err := config.ParseJSON(b)
	if err != nil {
		return nil, err
	}
	var c Config
	if err := config.DecodeStrict(tree, &c, ""); err != nil {
		return nil, govern.FromConfig(err.(config.Problems))
	}
	v := validator{}
	v.defaults(&c)
	v.durations(&c)
	if c.Governance != nil {
		plan, err := govern.Compile(c.Governance)
		if err != nil {
			v.problems = append(v.problems, err.(govern.Problems)...)
		}
		c.Plan = plan
	}
	v.accountant(&c)
	v.providers(c.Providers)
	v.keys(&c)
	v.providerNames(&c)
	if len(v.problems) > 0 {
		return nil, v.problems
	}
	return &c, nil
}

// SyncEvery is sync_interval as a duration.
func (c *Config) SyncEvery() time.Duration { return durationOr(c.SyncInterval, DefaultSyncInterval) }

// FlushEvery is flush_interval as a duration.
func (c *Config) FlushEvery() time.Duration {
	return durationOr(c.FlushInterval, DefaultFlushInterval)
}

// LeaseTimeout is lease_ttl as a duration.
func (c *Config) LeaseTimeout() time.Duration { return durationOr(c.LeaseTTL, DefaultLeaseTTL) }

// MinTick is the shortest tick period the filter asks the host for.
const MinTick = 10 * time.Millisecond

// TickEvery is how often the filter asks the host to call its tick: the
// flush interval, or the sync interval when an accountant is set and it is
// shorter, and never under MinTick.
func (c *Config) TickEvery() time.Duration {
	p := c.FlushEvery()
	if c.Accountant != nil && c.SyncEvery() < p {
		p = c.SyncEvery()
	}
	return max(p, MinTick)
}

// SnapshotTrust is how long a filter trusts a spend snapshot after the
// accountant made it (seed 000: thirty seconds), and SnapshotHeartbeat how
// often the accountant makes a new one when nothing else does (seed 000:
// five seconds). A filter must poll often enough that the snapshot it holds
// never ages past the trust between two polls.
const (
	SnapshotTrust     = 30 * time.Second
	SnapshotHeartbeat = 5 * time.Second
)

// LeaseTicks is how many ticks lease_ttl must span at least: a VM pushes
// the expiry of what it holds forward at its tick, so a lease must outlive
// a late tick or two.
const LeaseTicks = 3

func durationOr(s, def string) time.Duration {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d
	}
	d, _ := time.ParseDuration(def)
	return d
}

type validator struct {
	problems govern.Problems
}

func (v *validator) at(p, format string, args ...any) {
	v.problems = append(v.problems, govern.Problem{Path: p, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) defaults(c *Config) {
	if c.SyncInterval == "" {
		c.SyncInterval = DefaultSyncInterval
	}
	if c.FlushInterval == "" {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.LeaseTTL == "" {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if a := c.Accountant; a != nil {
		if a.Authority == "" {
			a.Authority = a.Cluster
		}
		if a.TimeoutMS == 0 {
			a.TimeoutMS = DefaultTimeoutMS
		}
	}
}

func (v *validator) durations(c *Config) {
	for _, f := range []struct{ name, value string }{
		{"sync_interval", c.SyncInterval}, {"flush_interval", c.FlushInterval}, {"lease_ttl", c.LeaseTTL},
	} {
		d, err := time.ParseDuration(f.value)
		switch {
		case err != nil:
			v.at(f.name, "%q is not a Go duration (write e.g. 500ms, 1s, 15m)", f.value)
		case d <= 0:
			v.at(f.name, "must be positive, got %q", f.value)
		}
	}
	if ttl, tick := c.LeaseTimeout(), c.TickEvery(); len(v.problems) == 0 && ttl < LeaseTicks*tick {
		v.at("lease_ttl", "%q is shorter than %d of the filter's ticks (every %s: flush_interval, or sync_interval when shorter and an accountant is set); "+
			"a VM refreshes the leases and reserves it holds at its tick, so those of requests still running would lapse between refreshes "+
			"and concurrency, tpm and budget reserve limits would stop holding across worker VMs; set lease_ttl to at least %s (default %s), or shorten flush_interval",
			c.LeaseTTL, LeaseTicks, tick, LeaseTicks*tick, DefaultLeaseTTL)
	}
	if tick := c.TickEvery(); len(v.problems) == 0 && c.Accountant != nil && c.SyncEvery()+SnapshotHeartbeat+tick > SnapshotTrust {
		v.at("sync_interval", "%q is too long: a spend snapshot is trusted for %s after the accountant makes it (it makes one every %s), "+
			"and a filter that polls every %s (checking at its ticks, every %s) would hold a stale one for part of every interval, "+
			"leaving budget and quota limits unchecked then (admitted as suspended, or 503 under fail: closed); set sync_interval to at most %s (default %s)",
			c.SyncInterval, SnapshotTrust, SnapshotHeartbeat, c.SyncEvery(), tick, SnapshotTrust-SnapshotHeartbeat-tick, DefaultSyncInterval)
	}
	if c.MaxBodyBytes < 0 {
		v.at("max_body_bytes", "must be positive, got %d (default %d)", c.MaxBodyBytes, DefaultMaxBodyBytes)
	}
}

func (v *validator) accountant(c *Config) {
	a := c.Accountant
	if a == nil {
		if c.Governance == nil {
			v.at("accountant", "required when governance is absent (the plan then comes from the accountant); set accountant.cluster, or embed a governance block")
		}
		return
	}
	if a.Cluster == "" {
		v.at("accountant.cluster", "required (the host's upstream cluster that reaches the accountant)")
	}
	if a.TimeoutMS < 0 {
		v.at("accountant.timeout_ms", "must be positive, got %d (default %d)", a.TimeoutMS, DefaultTimeoutMS)
	}
	switch {
	case a.TokenEnv == "":
	case a.Token != "":
		v.at("accountant.token_env", "set only one of token and token_env (token_env names the environment variable that holds the token)")
	case !isEnvName(a.TokenEnv):
		v.at("accountant.token_env", "%q is not an environment variable name (letters, digits and _, not starting with a digit), e.g. TT_ACCOUNTANT_TOKEN", a.TokenEnv)
	}
}

// BearerToken is the bearer token for internal calls: Token, or the value
// of the environment variable TokenEnv names, looked up with getenv (the
// filter passes os.Getenv, which reads the VM's WASI environment). A
// TokenEnv whose variable is unset or empty is an error saying how to set
// it; no token at all is "" and no error.
func (a *Accountant) BearerToken(getenv func(string) string) (string, error) {
	if a.TokenEnv == "" {
		return a.Token, nil
	}
	if t := getenv(a.TokenEnv); t != "" {
		return t, nil
	}
	return "", fmt.Errorf("accountant.token_env: the environment variable %s is not set in the wasm VM (or is empty); pass it with Envoy's vm_config.environment_variables (key_values, or host_env_keys from Envoy's own environment), or Istio's WasmPlugin vmConfig.env", a.TokenEnv)
}

// isEnvName reports whether s is a portable environment variable name.
func isEnvName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

func (v *validator) providers(ps []Provider) {
	for i, p := range ps {
		at := "providers[" + strconv.Itoa(i) + "]"
		switch {
		case p.Name == "":
			v.at(at+".name", "required (the provider name match.provider compares against, e.g. openai)")
		case !govern.ProviderNameOK(p.Name):
			v.at(at+".name", "%q: provider names are lowercase letters, digits, '-', '_' and '.', as match.provider writes them; write %q", p.Name, strings.ToLower(p.Name))
		}
		if p.PathPrefix != "" && !strings.HasPrefix(p.PathPrefix, "/") {
			v.at(at+".path_prefix", "%q is not a path prefix; write it with a leading /, e.g. /v1/messages", p.PathPrefix)
		}
		if p.Route == "" && p.Authority == "" && p.PathPrefix == "" && i < len(ps)-1 {
			v.at(at, "matches every request (no route, authority or path_prefix), so providers[%d] and later can never match; move it last", i+1)
		}
	}
}

// providerNames checks the provider names the embedded limits and the
// static keys match against the names the filter can give a request: its
// providers rules' names and, unless a rule matches every request, the
// names it infers from the path (anthropic, openai). A name outside them
// never matches, so the limit never counts or the key is refused on every
// call.
func (v *validator) providerNames(c *Config) {
	names := c.ProviderNames()
	check := func(at, name string) {
		if name == "" || !govern.ProviderNameOK(name) || slices.Contains(names, name) {
			return // empty or miscased names have their own problem
		}
		v.at(at, "%s", UnknownProvider(name, names))
	}
	if c.Plan != nil {
		for _, l := range c.Plan.Limits {
			check(l.Path+".match.provider", l.Match.Provider)
		}
	}
	for i, k := range c.Keys {
		for j, p := range k.Scopes.Providers {
			check("keys["+strconv.Itoa(i)+"].scopes.providers["+strconv.Itoa(j)+"]", p)
		}
	}
}

// ProviderNames lists, sorted, the provider names the filter can give a
// request under c: its providers rules' names (up to the first rule that
// matches every request) and, unless such a rule exists, the names it
// infers from the path (anthropic, openai).
func (c *Config) ProviderNames() []string {
	given := map[string]bool{}
	for _, n := range govern.InferredProviders {
		given[n] = true
	}
	for _, p := range c.Providers {
		if p.Route == "" && p.Authority == "" && p.PathPrefix == "" {
			given = map[string]bool{} // a catch-all rule: the path is never asked
			break
		}
	}
	for _, p := range c.Providers {
		if p.Name != "" {
			given[p.Name] = true
		}
		if p.Route == "" && p.Authority == "" && p.PathPrefix == "" {
			break // rules after a catch-all are never reached (reported by providers)
		}
	}
	names := make([]string, 0, len(given))
	for n := range given {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// UnknownProvider says why a provider name outside names (ProviderNames)
// never matches, and what to do.
func UnknownProvider(name string, names []string) string {
	return fmt.Sprintf("%q never matches: no providers rule names it and the filter does not infer it (the provider names a request can be given here: %s); add a providers rule {\"name\": %q, ...} that picks its requests, or correct the name",
		name, strings.Join(names, ", "), name)
}

func (v *validator) keys(c *Config) {
	kids := map[string]string{}
	hashes := map[string]string{}
	checkTree := c.Accountant == nil && c.Plan != nil
	for i, k := range c.Keys {
		at := "keys[" + strconv.Itoa(i) + "]"
		switch {
		case !vkey.ValidKID(k.KID):
			v.at(at+".kid", "%q is not a kid (vk_ followed by 12 base62 characters)", k.KID)
		case kids[k.KID] != "":
			v.at(at+".kid", "duplicate kid %q (also %s)", k.KID, kids[k.KID])
		default:
			kids[k.KID] = at
		}
		switch {
		case !isSHA256Hex(k.SHA256):
			v.at(at+".sha256", "expected the hex SHA-256 of the key (64 lowercase hex characters), got %q", k.SHA256)
		case hashes[k.SHA256] != "":
			v.at(at+".sha256", "duplicate key hash (also %s)", hashes[k.SHA256])
		default:
			hashes[k.SHA256] = at
		}
		switch err := govern.ValidNodeID(k.Owner); {
		case k.Owner == "":
			v.at(at+".owner", "required (the node that owns the key, e.g. org:acme/team:ml/user:dev1)")
		case err != nil:
			v.at(at+".owner", "%s", err)
		case checkTree && !c.Plan.HasNode(k.Owner):
			v.at(at+".owner", "node %q is not declared in governance.tenants, so no template limit would bind this key; declare it, or fix the owner", k.Owner)
		}
		v.scopes(at+".scopes", k.Scopes)
	}
}

// scopes checks a static key's scopes by the rules the management API
// mints keys by (govern.ScopeProblems).
func (v *validator) scopes(at string, sc vkey.Scopes) {
	for _, p := range govern.ScopeProblems(sc) {
		v.at(at+"."+p.Field, "%s", p.Message)
	}
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
