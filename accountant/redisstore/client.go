// Package redisstore owns the accountant's use of the fleet's shared Redis
// (shared_state.redis, or --redis): the leases a replica takes of a fleet
// limit (store: redis rpm and tpm cells, the spend and quota of reserve
// mode, the slots of a concurrency limit under store: share), each run by
// one Lua script with shared/rate's arithmetic; each accountant's own
// spend and quota totals, published idempotently and summed into fleet
// totals; and the heartbeats that count the fleet's live replicas.
//
// Redis runs as a single server, behind Sentinel, or as a Redis Cluster
// (go-redis's UniversalClient), over TLS where the deployment wants it, with
// an ACL user. Every key of one counter carries that counter's hash tag
// ("{" + its identity + "}"), so the keys a script touches share a Redis
// Cluster slot while the counters of different tenants spread over the
// cluster's slots; the few fleet-wide keys (the epoch, the replica
// heartbeats, the index of each period's totals) carry the key prefix's tag.
// Redis is soft state: the ledgers are the truth, and what Redis loses the
// accountants and their replicas write again.
//
// The client watches its connection: an operation that fails on the
// network marks Redis down (logged once, tt_accountant_redis_up 0),
// operations then fail at once with ErrDown instead of waiting for a
// deadline, and a probe brings it back as soon as a PING answers. An
// operation past its deadline fails alone with ErrTimeout. Every caller has
// a local answer for both and says so.
package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// DefaultTimeout is seed 000's per-operation deadline of store: redis.
const DefaultTimeout = 5 * time.Millisecond

// probeEvery is how often a client that lost Redis tries it again.
const probeEvery = 250 * time.Millisecond

// ErrDown is returned, without trying, while Redis is known to be down.
var ErrDown = errors.New("redis is down")

// Options configure a Client.
type Options struct {
	// Addr is host:port of the Redis server, or a redis:// or rediss://
	// (TLS) URL, which may carry the user, the password and the database.
	Addr string
	// Addrs are the seed nodes of a Redis Cluster (Cluster), or the
	// Sentinels that name the master (MasterName). Addr is then empty.
	Addrs []string
	// Cluster: Addrs (or Addr) is a node of a Redis Cluster.
	Cluster bool
	// MasterName is the master Sentinel watches; SentinelUsername and
	// SentinelPassword authenticate to the Sentinels.
	MasterName                         string
	SentinelUsername, SentinelPassword string
	// Username and Password authenticate (an ACL user, or the default
	// user with requirepass); they win over a URL's.
	Username string
	Password string
	DB       int
	// TLS, when set, is the TLS configuration of every connection (a
	// rediss:// URL without it uses the system's roots).
	TLS *tls.Config
	// Prefix is the key prefix (shared_state.redis.key_prefix, "tt").
	Prefix string
	// Timeout is the per-operation deadline of the request path (rate
	// cells, holds). Zero: DefaultTimeout.
	Timeout time.Duration
	// Logger receives the up and down transitions. Nil: slog.Default().
	Logger *slog.Logger
	// Registerer receives the client's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Client is the accountant's connection to the shared Redis. It is safe
// for concurrent use.
type Client struct {
	rdb     redis.UniversalClient
	addr    string // for log lines: the address, or the seeds
	prefix  string // the key prefix, without a tag
	global  string // prefix + ":{" + prefix + "}:", the fleet-wide keys' start
	timeout time.Duration
	log     *slog.Logger

	up        atomic.Bool
	mu        sync.Mutex
	lastErr   error
	downSince time.Time
	onUp      []func()
	probing   bool
	// everUp: a PING has answered since New; until then a probe's first
	// failure is logged (a lost connection is logged by markDown).
	everUp    bool
	told      bool // the first failure to reach Redis was logged
	closed    chan struct{}
	closeOnce sync.Once

	m *clientMetrics
}

type clientMetrics struct {
	up      prometheus.Gauge
	ops     *prometheus.CounterVec
	latency *prometheus.HistogramVec
	downs   prometheus.Counter
}

// New returns a client for opts. It does not wait for Redis: the first
// probe runs at once, and until it answers the client reports down.
func New(opts Options) (*Client, error) {
	uo, addr, err := universalOptions(opts)
	if err != nil {
		return nil, err
	}
	if opts.Prefix == "" {
		opts.Prefix = "tt"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Client{
		rdb:     redis.NewUniversalClient(uo),
		addr:    addr,
		prefix:  opts.Prefix,
		global:  opts.Prefix + ":{" + opts.Prefix + "}:",
		timeout: opts.Timeout,
		log:     opts.Logger,
		closed:  make(chan struct{}),
		m:       newClientMetrics(opts.Registerer),
	}
	routeRedisLog(opts.Logger)
	c.mu.Lock()
	c.lastErr = errors.New("not connected yet")
	c.downSince = time.Now()
	c.startProbeLocked()
	c.mu.Unlock()
	return c, nil
}

// universalOptions turns opts into go-redis's options, and names the
// server (or its seeds) for log lines.
func universalOptions(opts Options) (*redis.UniversalOptions, string, error) {
	uo := &redis.UniversalOptions{
		Username:         opts.Username,
		Password:         opts.Password,
		DB:               opts.DB,
		TLSConfig:        opts.TLS,
		MasterName:       opts.MasterName,
		SentinelUsername: opts.SentinelUsername,
		SentinelPassword: opts.SentinelPassword,
		IsClusterMode:    opts.Cluster,
		// A script is not idempotent (a lease takes units): never send it
		// twice on our behalf. A cluster still follows MOVED and ASK
		// (a slot that moved), which sends nothing twice.
		MaxRetries:            -1,
		DialTimeout:           time.Second,
		ReadTimeout:           2 * time.Second,
		WriteTimeout:          2 * time.Second,
		ContextTimeoutEnabled: true,
		// No RESP3 handshake surprises with older servers.
		Protocol: 2,
		// The client name shows in CLIENT LIST on the server.
		ClientName: "tokentriage-accountant",
		// Connections kept open while idle, so the first requests of a
		// burst do not dial within their deadline.
		MinIdleConns: 2,
	}
	addr := opts.Addr
	switch {
	case strings.Contains(opts.Addr, "://"):
		u, err := redis.ParseURL(opts.Addr)
		if err != nil {
			return nil, "", fmt.Errorf("redis: the address %q is not a redis:// or rediss:// URL: %v", redactURL(opts.Addr), err)
		}
		uo.Addrs = []string{u.Addr}
		if uo.Username == "" {
			uo.Username = u.Username
		}
		if uo.Password == "" {
			uo.Password = u.Password
		}
		if uo.DB == 0 {
			uo.DB = u.DB
		}
		if uo.TLSConfig == nil {
			uo.TLSConfig = u.TLSConfig
		}
		addr = u.Addr
	case opts.Addr != "":
		if _, _, err := net.SplitHostPort(opts.Addr); err != nil {
			return nil, "", fmt.Errorf("redis: the address %q is not HOST:PORT: %v", opts.Addr, err)
		}
		uo.Addrs = []string{opts.Addr}
	case len(opts.Addrs) > 0:
		for _, a := range opts.Addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, "", fmt.Errorf("redis: the address %q is not HOST:PORT: %v", a, err)
			}
		}
		uo.Addrs = append([]string(nil), opts.Addrs...)
		addr = strings.Join(opts.Addrs, ",")
	default:
		return nil, "", errors.New("redis: no address (shared_state.redis.addr, or --redis HOST:PORT)")
	}
	if len(uo.Addrs) > 1 && !opts.Cluster && opts.MasterName == "" {
		return nil, "", fmt.Errorf("redis: %d addresses: set cluster (the seeds of a Redis Cluster) or sentinel_master (the Sentinels of a master)", len(uo.Addrs))
	}
	if opts.Cluster && opts.DB != 0 {
		return nil, "", fmt.Errorf("redis: a Redis Cluster has only database 0, not %d", opts.DB)
	}
	if opts.MasterName != "" {
		addr = opts.MasterName + " (sentinels " + addr + ")"
	}
	return uo, addr, nil
}

// redactURL hides a URL's password for a message.
func redactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return s
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return s
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

func newClientMetrics(reg prometheus.Registerer) *clientMetrics {
	m := &clientMetrics{
		up: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "tt", Subsystem: "accountant", Name: "redis_up",
			Help: "1 while the shared Redis answers, 0 while every Redis-backed limit answers locally (suspended)."}),
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tt", Subsystem: "accountant", Name: "redis_operations_total",
			Help: "Redis operations, by operation and result (ok; timeout: past the deadline; error; down: not tried because Redis was down)."}, []string{"op", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "tt", Subsystem: "accountant", Name: "redis_operation_seconds",
			Help: "Duration of each Redis operation that was tried.", Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)}, []string{"op"}),
		downs: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "tt", Subsystem: "accountant", Name: "redis_down_total",
			Help: "Times the shared Redis was lost (an operation failed on the network or past its deadline)."}),
	}
	if reg != nil {
		reg.MustRegister(m.up, m.ops, m.latency, m.downs)
	}
	return m
}

// Addr is the server's address (a cluster's seeds, a master's name and
// its Sentinels).
func (c *Client) Addr() string { return c.addr }

// Timeout is the request path's per-operation deadline.
func (c *Client) Timeout() time.Duration { return c.timeout }

// Up reports whether Redis answered the last operation or probe.
func (c *Client) Up() bool { return c.up.Load() }

// Down reports why Redis is down and since when, or "" while it is up.
func (c *Client) Down() (why string, since time.Time) {
	if c.up.Load() {
		return "", time.Time{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastErr == nil {
		return "down", c.downSince
	}
	return c.lastErr.Error(), c.downSince
}

// OnUp registers f to run (on a goroutine of its own) each time Redis comes
// back after being down, and once when it is first reached: the
// accountant republishes what Redis may have lost.
func (c *Client) OnUp(f func()) {
	c.mu.Lock()
	c.onUp = append(c.onUp, f)
	up := c.up.Load()
	c.mu.Unlock()
	if up {
		go f()
	}
}

// Close stops the probe and closes the connections.
func (c *Client) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.rdb.Close()
}

// counterKey is the key of kind for counter identity id: the prefix, the
// hash tag of the counter (its identity up to any "#" companion suffix,
// with braces escaped so the tag ends where it should), the rest of the
// identity, then kind. Every key of one counter shares its slot.
func (c *Client) counterKey(id, kind string) string {
	base, rest := id, ""
	if i := strings.IndexByte(id, '#'); i >= 0 {
		base, rest = id[:i], id[i:]
	}
	return c.prefix + ":{" + escapeTag(base) + "}" + escapeTag(rest) + ":" + kind
}

// escapeTag escapes the bytes that would end or open a hash tag early
// (and the escape itself), so distinct identities stay distinct keys.
func escapeTag(s string) string {
	if !strings.ContainsAny(s, "{}%") {
		return s
	}
	return tagEscaper.Replace(s)
}

var tagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// globalKey is a fleet-wide key (the epoch, the heartbeats, the index of a
// period's totals), in the prefix's own slot.
func (c *Client) globalKey(name string) string { return c.global + name }

// do runs one operation: at once ErrDown while Redis is down, else f under
// a deadline of timeout (0: the client's request-path deadline); a
// network failure or a missed deadline marks Redis down.
func (c *Client) do(ctx context.Context, op string, timeout time.Duration, f func(context.Context) error) error {
	if !c.up.Load() {
		c.m.ops.WithLabelValues(op, "down").Inc()
		return ErrDown
	}
	if timeout <= 0 {
		timeout = c.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	c.m.latency.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err == nil || err == redis.Nil {
		c.m.ops.WithLabelValues(op, "ok").Inc()
		return err
	}
	if pastDeadline(ctx, err) {
		// Slow, not gone: this operation answers locally; the next one
		// tries again.
		c.m.ops.WithLabelValues(op, "timeout").Inc()
		return fmt.Errorf("%w (%s)", ErrTimeout, timeout)
	}
	c.m.ops.WithLabelValues(op, "error").Inc()
	if lost(err) {
		c.markDown(op, err)
	}
	return err
}

// ErrTimeout is an operation that missed its deadline.
var ErrTimeout = errors.New("redis did not answer within the deadline")

// lost reports whether err means Redis cannot be used right now (the
// network, a deadline, a server still loading its data), rather than a
// refusal of this one command.
// pastDeadline reports whether err is the operation missing its own
// deadline: the context's error, or a network timeout once the deadline
// has passed. The connection's deadline is the context's, and on a busy
// machine it fires before the context's timer has run, while ctx.Err() is
// still nil: the "i/o timeout" that comes back then is the deadline too,
// not Redis gone (taken for it, one slow script under a burst marked Redis
// down and sent every Redis-backed limit to its local answer).
func pastDeadline(ctx context.Context, err error) bool {
	if e := ctx.Err(); e != nil && e != context.Canceled {
		return true
	}
	d, ok := ctx.Deadline()
	if !ok || time.Now().Before(d) {
		return false
	}
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

func lost(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"LOADING", "MASTERDOWN", "READONLY", "connection refused", "EOF", "broken pipe", "connection reset", "pool timeout", "client is closed", "i/o timeout"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// markDown records that Redis was lost and starts the probe.
func (c *Client) markDown(op string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.up.Load() {
		return
	}
	c.up.Store(false)
	c.lastErr = err
	c.downSince = time.Now()
	c.m.up.Set(0)
	c.m.downs.Inc()
	c.log.Warn("redis: lost; every Redis-backed limit answers locally and says suspended until it is back",
		"addr", c.Addr(), "op", op, "err", err.Error())
	c.startProbeLocked()
}

func (c *Client) startProbeLocked() {
	if c.probing {
		return
	}
	c.probing = true
	go c.probe()
}

// probe PINGs until Redis answers, then marks it up.
func (c *Client) probe() {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			c.loadScripts()
			c.mu.Lock()
			c.probing = false
			c.everUp = true
			c.up.Store(true)
			c.m.up.Set(1)
			since := c.downSince
			c.lastErr = nil
			hooks := append([]func(){}, c.onUp...)
			c.mu.Unlock()
			c.log.Info("redis: connected", "addr", c.Addr(), "down_for", time.Since(since).Round(time.Millisecond).String())
			for _, f := range hooks {
				go f()
			}
			return
		}
		c.mu.Lock()
		c.lastErr = err
		first := !c.everUp && !c.told
		c.told = c.told || first
		c.mu.Unlock()
		if first {
			c.log.Warn("redis: not reachable; every Redis-backed limit answers locally and says suspended until it answers",
				"addr", c.Addr(), "err", err.Error())
		}
		select {
		case <-c.closed:
			c.mu.Lock()
			c.probing = false
			c.mu.Unlock()
			return
		case <-t.C:
		}
	}
}

// scripts are the Lua scripts the accountant runs. Each is loaded into
// Redis's script cache when Redis is reached, before it is marked up: a
// script not in the cache costs its first call a NOSCRIPT answer and a
// second round trip carrying the whole script, and the first request of a
// store: redis limit missed its 5 ms deadline on that alone (it was
// answered locally and said suspended, so a fresh fleet admitted one
// arrival more than its limit on every replica).
var scripts = []*redis.Script{rateScript, leaseScript, publishScript, epochScript, indexScript}

// loadScripts loads scripts and leaves a couple of connections open for
// the request path. A failure is not Redis down: a script missing from
// the cache still runs, at the cost of the extra round trip.
func (c *Client) loadScripts() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, sc := range scripts {
		if err := sc.Load(ctx, c.rdb).Err(); err != nil {
			c.log.Debug("redis: loading a script into the script cache", "err", err.Error())
		}
	}
}

// redisLog takes the go-redis client's own log lines (a failed dial of its
// pool, every probe while Redis is away) to the accountant's logger at
// debug level: left to go-redis they went to stderr in a format of their
// own, several a second for as long as Redis was down, while the client's
// transitions are logged once each above.
type redisLog struct{ log atomic.Pointer[slog.Logger] }

func (l *redisLog) Printf(ctx context.Context, format string, v ...any) {
	if lg := l.log.Load(); lg != nil {
		lg.DebugContext(ctx, strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "), "from", "go-redis")
	}
}

var (
	goRedisLog     redisLog
	goRedisLogOnce sync.Once
)

// routeRedisLog sends go-redis's log lines to lg (the process-wide logger
// of go-redis: the last client made names it).
func routeRedisLog(lg *slog.Logger) {
	goRedisLog.log.Store(lg)
	goRedisLogOnce.Do(func() { redis.SetLogger(&goRedisLog) })
}
