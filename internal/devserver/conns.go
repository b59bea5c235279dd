package devserver

import (
	"container/list"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The gateway's downstream connections are capped the way Envoy's overload
// manager caps them (its global_downstream_max_connections resource
// monitor, with the reduce_timeouts and reject_incoming_connections
// actions), so idle clients cannot take every file descriptor and lock out
// everyone else (about 20,000 idle keep-alive connections did: new clients
// were refused and 5,873 rows dropped):
//
//   - past MaxConnections, a new connection first closes the connection
//     idle longest (no request in flight: kept alive between requests, or
//     opened and never used) and takes its place; with none idle it is
//     refused (closed at once), counted and logged;
//   - from ShedFraction of the cap, connections idle longer than ShedIdle
//     are closed, oldest first, on a sweep every second (Envoy scales its
//     idle timeouts down under pressure the same way);
//   - below that, a kept-alive connection idles up to an hour (Envoy's
//     downstream idle_timeout default).
//
// See RATIONALE.md, "Why does dev cap its connections?".
const (
	// MaxConnectionsCeiling bounds the default cap: each idle connection
	// holds a goroutine and buffers (about 10 KB).
	MaxConnectionsCeiling = 50_000
	// ShedFraction is the share of the cap from which idle connections are
	// shed.
	ShedFraction = 0.9
	// ShedIdle is how long a connection may idle once shedding.
	ShedIdle = 10 * time.Second
	// fdReserve is what the default cap leaves of the descriptor limit for
	// everything else of the process (the accountant's listener and its
	// callout connections, the ledger, governance.db, the compiled-code
	// cache): at least 256, a tenth of the limit.
	fdReserveMin = 256
)

// DefaultMaxConnections is the cap of a gateway whose options set none:
// nine tenths of the process's file descriptor limit (the soft limit, which
// Go raises to the hard one at start), at least 64 descriptors below it,
// at most MaxConnectionsCeiling.
func DefaultMaxConnections() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == 0 {
		return 1024
	}
	n := int(min(lim.Cur, 1<<30))
	return max(min(n-max(fdReserveMin, n/10), MaxConnectionsCeiling), 64)
}

// connCap tracks the gateway's connections and enforces the cap.
type connCap struct {
	max  int
	log  *slog.Logger
	now  func() time.Time
	idle list.List // of *trackedConn with no request in flight, idle longest first

	mu    sync.Mutex
	conns map[net.Conn]*trackedConn

	open             atomic.Int64
	refused, evicted atomic.Int64
	shed             atomic.Int64
	lastRefusalLog   time.Time
}

type trackedConn struct {
	c     net.Conn
	since time.Time     // idle since (or opened)
	elem  *list.Element // in idle, nil while a request is in flight
}

func newConnCap(max int, log *slog.Logger) *connCap {
	return &connCap{max: max, log: log, now: time.Now, conns: map[net.Conn]*trackedConn{}}
}

// listener wraps ln: every connection it accepts is counted against the
// cap first.
func (c *connCap) listener(ln net.Listener) net.Listener { return &capListener{Listener: ln, cap: c} }

type capListener struct {
	net.Listener
	cap *connCap
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.cap.admit(conn) {
			return conn, nil
		}
		conn.Close()
	}
}

// admit tracks a new connection, closing the one idle longest to make room
// at the cap; false refuses it (none idle).
func (c *connCap) admit(conn net.Conn) bool {
	now := c.now()
	c.mu.Lock()
	var victim net.Conn
	if len(c.conns) >= c.max {
		front := c.idle.Front()
		if front == nil {
			c.mu.Unlock()
			c.refused.Add(1)
			c.logRefusal(now)
			return false
		}
		t := front.Value.(*trackedConn)
		c.untrackLocked(t)
		victim = t.c
	}
	t := &trackedConn{c: conn, since: now}
	t.elem = c.idle.PushBack(t)
	c.conns[conn] = t
	c.open.Store(int64(len(c.conns)))
	c.mu.Unlock()
	if victim != nil {
		c.evicted.Add(1)
		victim.Close()
	}
	return true
}

func (c *connCap) logRefusal(now time.Time) {
	c.mu.Lock()
	due := now.Sub(c.lastRefusalLog) >= 10*time.Second
	if due {
		c.lastRefusalLog = now
	}
	c.mu.Unlock()
	if due {
		c.log.Warn("gateway: refusing new connections: every one of the connections the gateway keeps has a request in flight",
			"max_connections", c.max, "refused_total", c.refused.Load())
	}
}

func (c *connCap) untrackLocked(t *trackedConn) {
	if t.elem != nil {
		c.idle.Remove(t.elem)
		t.elem = nil
	}
	delete(c.conns, t.c)
	c.open.Store(int64(len(c.conns)))
}

// counts returns the connections held and, of them, those idle.
func (c *connCap) counts() (open, idle int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns), c.idle.Len()
}

// state is the http.Server's ConnState hook: a connection with a request in
// flight is not idle; one between requests is, from now.
func (c *connCap) state(conn net.Conn, st http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.conns[conn]
	if t == nil {
		return
	}
	switch st {
	case http.StateActive:
		if t.elem != nil {
			c.idle.Remove(t.elem)
			t.elem = nil
		}
	case http.StateIdle:
		if t.elem != nil {
			c.idle.Remove(t.elem)
		}
		t.since = c.now()
		t.elem = c.idle.PushBack(t)
	case http.StateClosed, http.StateHijacked:
		c.untrackLocked(t)
	}
}

// sweep closes, once the connections reach ShedFraction of the cap, those
// idle longer than ShedIdle, idle longest first.
func (c *connCap) sweep() {
	now := c.now()
	var victims []net.Conn
	c.mu.Lock()
	for float64(len(c.conns)) >= ShedFraction*float64(c.max) {
		front := c.idle.Front()
		if front == nil {
			break
		}
		t := front.Value.(*trackedConn)
		if now.Sub(t.since) < ShedIdle {
			break
		}
		c.untrackLocked(t)
		victims = append(victims, t.c)
	}
	c.mu.Unlock()
	for _, v := range victims {
		v.Close()
	}
	c.shed.Add(int64(len(victims)))
}

// run sweeps every second until done closes.
func (c *connCap) run(done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			c.sweep()
		}
	}
}

// collector shows the cap on the accountant's /metrics.
func (c *connCap) collector() prometheus.Collector { return connStats{c} }

type connStats struct{ c *connCap }

var (
	descConnsOpen    = prometheus.NewDesc("tt_gateway_downstream_connections", "Client connections the gateway holds.", nil, nil)
	descConnsMax     = prometheus.NewDesc("tt_gateway_downstream_connections_max", "The most client connections the gateway holds (Options.MaxConnections).", nil, nil)
	descConnsRefused = prometheus.NewDesc("tt_gateway_downstream_connections_refused_total", "New client connections refused at the cap, with every held connection busy.", nil, nil)
	descConnsEvicted = prometheus.NewDesc("tt_gateway_downstream_connections_idle_closed_total", "Idle client connections closed to make room for new ones, or shed idle past ShedIdle near the cap.", nil, nil)
)

func (s connStats) Describe(ch chan<- *prometheus.Desc) {
	ch <- descConnsOpen
	ch <- descConnsMax
	ch <- descConnsRefused
	ch <- descConnsEvicted
}

func (s connStats) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descConnsOpen, prometheus.GaugeValue, float64(s.c.open.Load()))
	ch <- prometheus.MustNewConstMetric(descConnsMax, prometheus.GaugeValue, float64(s.c.max))
	ch <- prometheus.MustNewConstMetric(descConnsRefused, prometheus.CounterValue, float64(s.c.refused.Load()))
	ch <- prometheus.MustNewConstMetric(descConnsEvicted, prometheus.CounterValue, float64(s.c.evicted.Load()+s.c.shed.Load()))
}
