package govern

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/shared/config"
)

// DefaultRedisTimeout is seed 000's deadline of one store: redis decision
// (shared_state.redis.timeout).
const DefaultRedisTimeout = 5 * time.Millisecond

// RedisTimeout is the plan's shared_state.redis.timeout, or
// DefaultRedisTimeout; 0 when the plan has no shared Redis.
func (p *Plan) RedisTimeout() time.Duration {
	if p == nil || p.SharedState == nil || p.SharedState.Redis == nil {
		return 0
	}
	if d, err := time.ParseDuration(p.SharedState.Redis.Timeout); err == nil && d >= time.Millisecond {
		return d
	}
	return DefaultRedisTimeout
}

// ReserveCap is the output half of a tpm reserve when a request sets no
// max_tokens (and its ceiling when it does): a tpm limit's burst must hold
// at least this much.
const ReserveCap = 16384

// WindowCeiling is the largest amount the window algorithms (fixed_window,
// sliding_window) can count in one window.
const WindowCeiling = 65535

// Compile turns a decoded governance block into an immutable Plan. It runs
// every check seeds 002 and 004 place at validate time and at boot, plus the
// shapes this project rejects because they load and silently do nothing,
// and returns every problem at once as Problems. A nil block compiles to a
// disabled plan.
func Compile(g *config.Governance) (*Plan, error) {
	c := &compiler{}
	if g == nil {
		g = &config.Governance{}
		c.absent = true
	}
	p := &Plan{
		Enabled:        g.Enabled != nil && *g.Enabled,
		RequireKey:     g.RequireKey,
		DiscloseLimits: g.Keys == nil || g.Keys.DiscloseLimits == nil || *g.Keys.DiscloseLimits,
		Source:         g,
	}
	if c.absent {
		p.Source = nil
	}
	p.SharedState = c.sharedState(g.SharedState)
	p.ProviderRefusals = c.refusals(g.Refusals)
	p.tree = c.tenancy(g.Tenants)
	c.timezone(g.Timezone)
	p.Attributes = c.attributes(g.Attributes)
	p.nodes = sortedNodes(p.tree)

	ids := map[string]string{}
	for i := range g.Limits {
		l := c.limit(i, &g.Limits[i], p.tree, p.SharedState)
		if l.ID != "" && charsetOK(l.ID) {
			if prev, dup := ids[l.ID]; dup {
				c.at(l.Path+".id", "duplicate limit id %q (also %s); every limit needs its own id", l.ID, prev)
			} else {
				ids[l.ID] = l.Path
			}
		}
		p.Limits = append(p.Limits, l)
	}
	if len(c.problems) > 0 {
		return nil, c.problems
	}
	sort.Slice(p.Limits, func(a, b int) bool { return p.Limits[a].ID < p.Limits[b].ID })
	p.byID = make(map[string]*Limit, len(p.Limits))
	for _, l := range p.Limits {
		p.byID[l.ID] = l
	}
	hash, err := hashGovernance(p.Source)
	if err != nil {
		return nil, Problems{{Path: "governance", Message: "hashing the plan: " + err.Error()}}
	}
	p.Hash = hash
	return p, nil
}

type compiler struct {
	problems Problems
	absent   bool
	// defaultZone is governance.timezone, when valid.
	defaultZone string
}

// at records a problem at a config path.
func (c *compiler) at(path, format string, args ...any) {
	c.problems = append(c.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// boot records one of the problems a limit's compile step reports, worded
// as seeds 002 and 004 quote them (governance: compile limits: govern:
// limit "<id>": ...). Without a usable id it falls back to the path form.
func (c *compiler) boot(l *Limit, path, format string, args ...any) {
	id := l.ID
	if id == "" || !charsetOK(id) {
		id = ""
	}
	c.problems = append(c.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...), Limit: id})
}

func (c *compiler) sharedState(s *config.SharedState) *config.SharedState {
	if s == nil || s.Redis == nil {
		return nil
	}
	r := *s.Redis
	const p = "governance.shared_state.redis"
	switch {
	case r.Addr == "" && len(r.Addrs) == 0:
		c.at(p+".addr", "required (host:port of the Redis server, or a redis:// or rediss:// URL; addrs for the seeds of a cluster or the Sentinels)")
	case r.Addr != "" && len(r.Addrs) > 0:
		c.at(p+".addrs", "set addr or addrs, not both")
	case len(r.Addrs) > 0 && !r.Cluster && r.SentinelMaster == "":
		c.at(p+".addrs", "several addresses are the seeds of a Redis Cluster (set cluster: true) or Sentinels (set sentinel_master)")
	}
	if r.Cluster && r.SentinelMaster != "" {
		c.at(p+".sentinel_master", "a Redis Cluster is not behind Sentinel: set cluster or sentinel_master, not both")
	}
	if r.SentinelMaster != "" && len(r.Addrs) == 0 {
		c.at(p+".addrs", "sentinel_master needs the Sentinels' addresses in addrs")
	}
	for i, a := range r.Addrs {
		if !hostPort(a) {
			c.at(fmt.Sprintf("%s.addrs[%d]", p, i), "%q is not host:port", a)
		}
	}
	if r.Addr != "" {
		scheme, _, url := strings.Cut(r.Addr, "://")
		switch {
		case url && scheme != "redis" && scheme != "rediss":
			c.at(p+".addr", "%q: the scheme is redis:// or rediss:// (TLS)", r.Addr)
		case !url && !hostPort(r.Addr):
			c.at(p+".addr", "%q is not host:port (or a redis:// or rediss:// URL)", r.Addr)
		}
		if url && r.SentinelMaster != "" {
			c.at(p+".addr", "a URL names one server: with sentinel_master, list the Sentinels in addrs")
		}
	}
	if r.DB < 0 {
		c.at(p+".db", "must be 0 or more, got %d", r.DB)
	}
	if r.Cluster && r.DB != 0 {
		c.at(p+".db", "a Redis Cluster has only database 0, got %d", r.DB)
	}
	if (r.TLSCertFile == "") != (r.TLSKeyFile == "") {
		c.at(p+".tls_cert_file", "a client certificate needs both tls_cert_file and tls_key_file")
	}
	if !r.TLS && !strings.HasPrefix(r.Addr, "rediss://") && (r.TLSCAFile != "" || r.TLSCertFile != "" || r.TLSKeyFile != "" || r.TLSServerName != "") {
		c.at(p+".tls", "tls_* files and names are read only over TLS: set tls: true (or write addr as rediss://)")
	}
	if r.KeyPrefix == "" {
		r.KeyPrefix = "tt"
	}
	if r.Timeout != "" {
		d, err := time.ParseDuration(r.Timeout)
		switch {
		case err != nil:
			c.at("governance.shared_state.redis.timeout", "%q is not a Go duration like 5ms or 250ms", r.Timeout)
		case d < time.Millisecond || d > time.Minute:
			c.at("governance.shared_state.redis.timeout", "must be from 1ms to 1m, got %s (the default is %s)", r.Timeout, DefaultRedisTimeout)
		}
	}
	return &config.SharedState{Redis: &r}
}

// hostPort reports whether a is host:port with a port number.
func hostPort(a string) bool {
	i := strings.LastIndexByte(a, ':')
	if i <= 0 || i == len(a)-1 {
		return false
	}
	for _, ch := range a[i+1:] {
		if ch < '0' || ch > '9' {
			return false
		}
	}
	return true
}

// Values of governance.refusals.shape.
const (
	ShapeTokentriage = "tokentriage"
	ShapeProvider    = "provider"
)

// refusals reads governance.refusals: whether refusals on OpenAI paths carry
// OpenAI's param and code members.
func (c *compiler) refusals(r *config.Refusals) bool {
	if r == nil {
		return false
	}
	switch r.Shape {
	case "", ShapeTokentriage:
		return false
	case ShapeProvider:
		return true
	}
	c.at("governance.refusals.shape", "unknown shape %q (known: tokentriage, the default: seed 000's body; provider: the same with OpenAI's param and code members; Anthropic endpoints always answer in Anthropic's envelope)", r.Shape)
	return false
}

// charsetOK reports whether a limit id is in [a-z0-9_]+.
func charsetOK(id string) bool {
	if id == "" {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func limitPath(i int) string { return "governance.limits[" + strconv.Itoa(i) + "]" }

func knownTypes() string {
	return strings.Join(typeNames[1:], ", ")
}

func itoa(i int) string { return strconv.Itoa(i) }
