// Package devserver owns the wiring of `tokentriage dev`: the accountant,
// the embedded proxy-wasm host (wasmtest) serving the built filter as the
// gateway, and the upstream behind it (the built-in stub of internal/stub,
// or a real provider whose key the proxy adds), in one process on loopback
// addresses. The dev command is a thin edge around Start; the end-to-end
// tests and the throughput benchmark start the same system in-process on
// 127.0.0.1:0.
//
// The filter's plugin configuration names only the accountant, so the
// accountant's config file is the single source of the plan, hot-reloaded
// (Server.Reload, SIGHUP in the dev command, or POST /tt/api/v1/reload) and
// picked up by every worker VM at its next sync.
package devserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokentriage/tokentriage/accountant"
	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/internal/stub"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/pluginconf"
	"github.com/tokentriage/tokentriage/wasmtest"
)

// Defaults of the dev command.
const (
	DefaultListen           = "127.0.0.1:8790"
	DefaultAccountantListen = "127.0.0.1:8791"
	DefaultWasm             = "build/filter.wasm"
	DefaultDataDir          = ".tt-data"
	// UpstreamStub selects the built-in stub upstream.
	UpstreamStub = "stub"
)

// AccountantCluster is the cluster name the filter's callouts use to reach
// the accountant.
const AccountantCluster = "accountant"

// VMID is the shared-data namespace of the gateway's worker VMs (the vm_id
// envoy/envoy.yaml uses too).
const VMID = "tokentriage"

// ArmTimeout bounds how long Start waits for the filter's first sync.
const ArmTimeout = 30 * time.Second

// ShutdownGrace is how long Shutdown lets in-flight requests finish before
// it cuts them, and then how long it waits for the filters' ledger rows to
// reach the accountant.
const ShutdownGrace = 10 * time.Second

// Options configure a dev system.
type Options struct {
	// ConfigPath is the tokentriage config file (YAML or JSON): the
	// accountant's, and through its sync the filter's plan.
	ConfigPath string
	// DataDir holds the accountant's decisions.jsonl and governance.db.
	DataDir string
	// Listen is the gateway's address; "" is DefaultListen, a port of 0
	// picks a free one (URL reports it).
	Listen string
	// AccountantListen is the accountant's address; "" is
	// DefaultAccountantListen.
	AccountantListen string
	// Upstream is "stub" (or "") for the built-in stub, served in process,
	// or the base URL of a real provider (https://api.openai.com).
	Upstream string
	// OpenAIKey and AnthropicKey are what the proxy sends a URL upstream as
	// the provider's credential: Anthropic's as x-api-key on /v1/messages,
	// OpenAI's as a bearer token on every other path. Whatever credential
	// the client sent (ClientCredentialHeaders) never reaches a URL upstream.
	OpenAIKey, AnthropicKey string
	// UpstreamTransport carries requests to a URL upstream; nil is a pooled
	// transport of the server's own.
	UpstreamTransport http.RoundTripper
	// Workers is the number of worker VMs; 0 is runtime.NumCPU().
	Workers int
	// Module is the built filter (build/filter.wasm; LoadModule reads it).
	Module []byte
	// WasmCache is where the filter's compiled code is kept between runs:
	// "" is wasmtest.DefaultCacheDir(), wasmtest.CacheOff compiles it in
	// memory at every start.
	WasmCache string
	// AdminToken is the management API's admin bearer token. Empty leaves
	// admin access off (and MintKey unusable).
	AdminToken string
	// InternalToken is the token the filter sends the accountant on every
	// callout (the plugin configuration's accountant.token) and the
	// accountant requires; empty generates one.
	InternalToken string
	// PricingFile extends or overrides the accountant's price catalog.
	PricingFile string
	// AlertWebhook receives a JSON POST per threshold alert.
	AlertWebhook string
	// AlertFormat and SpendReport are accountant.Options' (the webhook's
	// shape, and a daily spend report).
	AlertFormat, SpendReport string
	// Redis is the fleet's shared Redis (HOST:PORT): it replaces the
	// config's shared_state.redis.addr, or adds it. Several dev systems
	// sharing one Redis are a fleet.
	Redis string
	// Control is the base URL of the accountant that owns the fleet's
	// runtime plane; set, this system's accountant mirrors it (see
	// accountant.Options.Control). Promote takes over a mirrored plane.
	Control string
	// Advertise is the accountant's base URL as the fleet's other
	// accountants reach it (accountant.Options.Advertise).
	Advertise string
	Promote   bool
	// AcceptRollback is accountant.Options.AcceptPlaneRollback.
	AcceptRollback bool
	// RequestLog, when set, receives one line per request the gateway
	// answers: method, path, status, milliseconds, and from its ledger row
	// the key (name and kid), the limit that refused it, tokens and cost.
	RequestLog *slog.Logger
	// Logger receives the accountant's and the gateway's operational logs;
	// nil discards them.
	Logger *slog.Logger
	// FilterLog receives the filter's log lines (info and above); nil
	// discards them.
	FilterLog io.Writer

	// MaxRequestHeadersCount and MaxRequestHeadersKB bound a request's
	// header fields and their bytes (names, values, the method and the
	// request target); a request past either is answered 431 before the
	// filter runs, as Envoy's max_request_headers_count and
	// max_request_headers_kb do. 0 means Envoy's defaults, 100 and 60;
	// MaxRequestHeadersKB is at most MaxRequestHeadersKB (the constant).
	MaxRequestHeadersCount int
	MaxRequestHeadersKB    int
	// StreamIdleTimeout ends a stream with no bytes from the client or the
	// upstream for this long (Envoy's stream_idle_timeout): 408 while no
	// response has started, so a client that stops sending its body
	// releases what it holds. 0 means wasmtest.DefaultStreamIdleTimeout
	// (5 minutes); negative turns it off.
	StreamIdleTimeout time.Duration
	// RequestTimeout answers 408 to a request not received whole this
	// long after its headers (Envoy's request_timeout); 0 turns it off.
	RequestTimeout time.Duration
	// LeaseTTL is the filter's lease_ttl: how long a concurrency lease or
	// a reserve outlives a VM that stopped refreshing it, and how long after
	// the last word of a call in flight the accountant closes it at its
	// estimate. 0 is the plugin's default (15 minutes).
	LeaseTTL time.Duration
	// AccountantFault, when set, stands between the filter and the
	// accountant's handler (tests and benchmarks that take the accountant
	// away).
	AccountantFault func(http.Handler) http.Handler
	// MaxConnections caps the gateway's client connections (conns.go):
	// past it a new connection closes the one idle longest, or is refused
	// when none is idle. 0 means DefaultMaxConnections().
	MaxConnections int
}

// The defaults and the ceiling of the request header limits (Envoy's).
const (
	DefaultMaxRequestHeadersCount = wasmtest.DefaultMaxHeadersCount
	DefaultMaxRequestHeadersKB    = wasmtest.DefaultMaxHeadersKB
	MaxRequestHeadersKB           = 8192
)

// Server is a running dev system.
type Server struct {
	opts      Options
	log       *slog.Logger
	acct      *accountant.Server
	host      *wasmtest.Host
	gwStats   gatewayStats // the filter's stats, on the accountant's /metrics
	stub      *stub.Stub
	upstream  string // what the upstream is, for people
	gw        *http.Server
	armed     atomic.Bool // the filter has its first plan: the gateway serves
	gwURL     string
	acctURL   string
	tick      time.Duration
	client    *http.Client
	gwDone    chan struct{}
	conns     *connCap
	acctStop  context.CancelFunc
	acctDone  chan struct{}
	acctErr   error
	closeOnce sync.Once
	closeErr  error
	reqLog    *reqLog // nil without Options.RequestLog
}

// BufferHeadroom is how far past the plugin configuration's max_body_bytes
// the embedded host lets the filter buffer a request body, so a body up to
// max_body_bytes reaches the filter and a larger one is answered by the
// filter's own JSON 413 (request_too_large), never by the host's bare one.
const BufferHeadroom = 1 << 20

// PluginConfig is the filter's plugin configuration in dev: it names only
// the accountant, and the internal token the filter sends it. The host
// honours a Pause at the headers as Envoy 1.35's StopIteration, so a
// governed request's headers wait for gate 2 (hold_headers).
//
// Rows leave every FlushInterval (the plugin's default is 500 ms): the
// rows a kill -9 of dev can lose are those of the requests that finished
// within about one interval and one ingest round trip of it
// (RELIABILITY.md). A leaseTTL of 0 leaves lease_ttl at the plugin's
// default (15 minutes).
func PluginConfig(token string, leaseTTL time.Duration) []byte {
	conf := map[string]any{
		"accountant":     map[string]string{"cluster": AccountantCluster, "token": token},
		"flush_interval": FlushInterval,
		"hold_headers":   true,
	}
	if leaseTTL > 0 {
		conf["lease_ttl"] = leaseTTL.String()
	}
	b, err := json.Marshal(conf)
	if err != nil {
		panic("devserver: marshalling the plugin configuration: " + err.Error())
	}
	return b
}

// FlushInterval is how often dev's filter sends its ledger rows to the
// accountant, a fifth of the plugin's default: in dev the accountant
// is in the same process and a crash takes the unsent rows with it.
const FlushInterval = "100ms"

// NewToken is 32 random bytes in hex: a fresh admin or internal token.
func NewToken() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// LoadModule reads the built filter at path.
func LoadModule(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("the filter %s is not built: run `make wasm` (or `make run`, which builds it and starts dev), or pass --wasm PATH", path)
	case err != nil:
		return nil, fmt.Errorf("reading the filter %s: %w", path, err)
	case len(b) == 0:
		return nil, fmt.Errorf("the filter %s is empty: rebuild it with `make wasm`", path)
	}
	return b, nil
}

// Start runs the accountant and the gateway and returns once the filter is
// armed: its first sync with the accountant brought the plan. ctx bounds
// the start only (and at most ArmTimeout is spent waiting for the first
// sync); the system runs until Shutdown or Close.
func Start(ctx context.Context, o Options) (_ *Server, err error) {
	switch {
	case o.ConfigPath == "":
		return nil, errors.New("devserver: no config file; pass -c FILE")
	case o.DataDir == "":
		return nil, errors.New("devserver: no data directory; pass --data DIR")
	case len(o.Module) == 0:
		return nil, errors.New("devserver: no filter module; build it with `make wasm`")
	}
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.AccountantListen == "" {
		o.AccountantListen = DefaultAccountantListen
	}
	if o.Workers <= 0 {
		o.Workers = runtime.NumCPU()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.InternalToken == "" {
		o.InternalToken = NewToken()
	}
	if o.MaxRequestHeadersCount <= 0 {
		o.MaxRequestHeadersCount = DefaultMaxRequestHeadersCount
	}
	if o.MaxRequestHeadersKB <= 0 {
		o.MaxRequestHeadersKB = DefaultMaxRequestHeadersKB
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = DefaultMaxConnections()
	}
	if o.MaxRequestHeadersKB > MaxRequestHeadersKB {
		return nil, fmt.Errorf("devserver: the request header limit %d KiB is over the most Envoy takes, %d KiB", o.MaxRequestHeadersKB, MaxRequestHeadersKB)
	}
	up, stubUp, desc, err := o.upstream()
	if err != nil {
		return nil, err
	}
	pluginConfig := PluginConfig(o.InternalToken, o.LeaseTTL)
	pc, err := pluginconf.Decode(pluginConfig)
	if err != nil {
		return nil, fmt.Errorf("devserver: the plugin configuration: %w", err)
	}
	s := &Server{
		opts:     o,
		log:      o.Logger,
		stub:     stubUp,
		upstream: desc,
		tick:     min(pc.FlushEvery(), pc.SyncEvery()),
		client:   &http.Client{Timeout: 10 * time.Second},
		conns:    newConnCap(o.MaxConnections, o.Logger),
	}
	defer func() {
		if err != nil {
			s.abort()
		}
	}()

	acctLn, err := net.Listen("tcp", o.AccountantListen)
	if err != nil {
		return nil, fmt.Errorf("devserver: listening for the accountant on %s: %w (is another tokentriage dev or accountant running? pass --accountant-listen ADDR)", o.AccountantListen, err)
	}
	// Both addresses are taken before anything slow starts, so a busy
	// port is reported at once, not after the worker VMs compiled.
	gwLn, err := net.Listen("tcp", o.Listen)
	if err != nil {
		acctLn.Close()
		return nil, fmt.Errorf("devserver: listening for the gateway on %s: %w (is another tokentriage dev running? pass --listen ADDR)", o.Listen, err)
	}
	gwOwned := true // closed here unless the gateway server took it
	defer func() {
		if gwOwned {
			gwLn.Close()
		}
	}()
	var onRows func([]ledger.Row)
	if o.RequestLog != nil {
		s.reqLog = newReqLog(o.RequestLog, func(kids []string) map[string]string {
			names, _ := s.acct.KeyNames(kids)
			return names
		})
		onRows = s.reqLog.ingested
	}
	acct, err := accountant.New(accountant.Options{
		ConfigPath:          o.ConfigPath,
		DataDir:             o.DataDir,
		Listen:              acctLn.Addr().String(),
		AdminToken:          o.AdminToken,
		InternalToken:       o.InternalToken,
		PricingFile:         o.PricingFile,
		AlertWebhook:        o.AlertWebhook,
		AlertFormat:         o.AlertFormat,
		SpendReport:         o.SpendReport,
		Logger:              o.Logger,
		Redis:               o.Redis,
		Control:             o.Control,
		Advertise:           o.Advertise,
		Promote:             o.Promote,
		AcceptPlaneRollback: o.AcceptRollback,
		OnRows:              onRows,
		Collectors:          []prometheus.Collector{&s.gwStats, s.conns.collector()},
		Debug:               map[string]http.Handler{"guest": serveGuestProfile(s.gwStats.host.Load)},
	})
	if err != nil {
		acctLn.Close()
		return nil, err
	}
	s.acct = acct
	s.acctURL = "http://" + acctLn.Addr().String()
	actx, stop := context.WithCancel(context.Background())
	s.acctStop = stop
	s.acctDone = make(chan struct{})
	go func() {
		defer close(s.acctDone)
		s.acctErr = acct.Serve(actx, acctLn)
	}()

	host, err := wasmtest.New(ctx, wasmtest.Config{
		Module:       o.Module,
		Cache:        s.wasmCache(),
		PluginConfig: pluginConfig,
		VMID:         VMID,
		PluginName:   "tokentriage",
		RootID:       "tokentriage",
		Workers:      o.Workers,
		Clock:        wasmtest.RealClock(),
		Clusters:     map[string]wasmtest.Cluster{AccountantCluster: s.accountantCluster(acct)},
		Upstream:     up,
		Log:          o.FilterLog,
		LogLevel:     wasmtest.LogInfo,
		BufferLimit:  bufferLimit(pc),

		MaxRequestHeadersCount:      o.MaxRequestHeadersCount,
		MaxRequestHeadersKB:         o.MaxRequestHeadersKB,
		StreamIdleTimeout:           o.StreamIdleTimeout,
		RequestTimeout:              o.RequestTimeout,
		AllowOnHeadersStopIteration: true,
		StatTags:                    statTags(),
	})
	if err != nil {
		return nil, fmt.Errorf("devserver: starting the filter: %w (is the module a build of cmd/filter? `make wasm` rebuilds it)", err)
	}
	s.host = host
	s.gwStats.host.Store(host)

	gwOwned = false
	s.gwURL = "http://" + gwLn.Addr().String()
	var gwHandler http.Handler = s.untilArmed(host) // wasmtest.Host finishes each request body itself
	if s.reqLog != nil {
		gwHandler = s.reqLog.wrap(gwHandler)
	}
	s.gw = &http.Server{
		Handler:           gwHandler,
		ReadHeaderTimeout: 10 * time.Second,
		// Envoy's downstream idle_timeout default: a kept-alive client
		// connection with no request in flight is closed after an hour,
		// so idle connections cannot pile up without bound.
		IdleTimeout: time.Hour,
		// Past this net/http answers 431 itself; the host's own limit,
		// which names the setting, is the one that applies.
		MaxHeaderBytes: o.MaxRequestHeadersKB<<10 + 64<<10,
		ErrorLog:       slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn),
		ConnState:      s.conns.state,
	}
	s.gwDone = make(chan struct{})
	go s.conns.run(s.gwDone)
	go func() {
		defer close(s.gwDone)
		if err := s.gw.Serve(s.conns.listener(gwLn)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("gateway stopped", "err", err)
		}
	}()

	if err := s.waitArmed(ctx); err != nil {
		return nil, err
	}
	s.armed.Store(true)
	s.log.Info("gateway listening", "addr", gwLn.Addr().String(), "workers", o.Workers, "upstream", desc, "max_connections", o.MaxConnections)
	return s, nil
}

// accountantCluster is how the filter reaches the accountant: its handler,
// in process (behind Options.AccountantFault when set). The accountant is
// in the same process, so a callout is a call of its handler on the
// callout's goroutine: no loopback connection, no HTTP written and parsed
// on both sides, which at a low rate cost more than the ingest itself
// (BENCHMARKS.md, "The filter's CPU at 50 and at 1,000 requests a
// second").
func (s *Server) accountantCluster(acct *accountant.Server) wasmtest.Cluster {
	h := acct.Handler()
	if s.opts.AccountantFault != nil {
		h = s.opts.AccountantFault(h)
	}
	return wasmtest.Cluster{Handler: h}
}

// bufferLimit is the embedded host's per-direction buffer limit (Envoy's
// per_connection_buffer_limit_bytes): the filter's max_body_bytes plus
// BufferHeadroom.
func bufferLimit(pc *pluginconf.Config) int {
	return int(pc.MaxBodyBytes) + BufferHeadroom
}

// upstream resolves Options.Upstream.
func (o *Options) upstream() (wasmtest.Cluster, *stub.Stub, string, error) {
	if o.Upstream == "" || o.Upstream == UpstreamStub {
		st := stub.New(stub.Options{})
		return wasmtest.Cluster{Handler: st}, st, "the built-in stub (deterministic usage, no provider is called)", nil
	}
	pt, err := newProviderTransport(o.Upstream, o.OpenAIKey, o.AnthropicKey, o.UpstreamTransport)
	if err != nil {
		return wasmtest.Cluster{}, nil, "", err
	}
	desc := o.Upstream
	if o.OpenAIKey == "" {
		o.Logger.Warn("OPENAI_API_KEY is not set: OpenAI paths reach the upstream without a provider key", "upstream", o.Upstream)
	}
	if o.AnthropicKey == "" {
		o.Logger.Warn("ANTHROPIC_API_KEY is not set: /v1/messages reaches the upstream without a provider key", "upstream", o.Upstream)
	}
	return wasmtest.Cluster{URL: o.Upstream, Transport: pt}, nil, desc, nil
}

// URL is the gateway's base URL, e.g. http://127.0.0.1:8790.
func (s *Server) URL() string { return s.gwURL }

// AccountantURL is the accountant's base URL, e.g. http://127.0.0.1:8791.
func (s *Server) AccountantURL() string { return s.acctURL }

// InternalToken is the token the filter and the accountant share.
func (s *Server) InternalToken() string { return s.opts.InternalToken }

// Upstream says what the upstream is.
func (s *Server) Upstream() string { return s.upstream }

// Workers is the number of worker VMs.
func (s *Server) Workers() int { return s.host.Workers() }

// Accountant is the accountant running in this process.
func (s *Server) Accountant() *accountant.Server { return s.acct }

// wasmCache opens the cache the options name. A directory that cannot
// be used is reported and the filter compiled in memory: the gateway
// starts slower, but it starts.
func (s *Server) wasmCache() *wasmtest.Cache {
	dir := s.opts.WasmCache
	if dir == "" {
		dir = wasmtest.DefaultCacheDir()
	}
	c, err := wasmtest.OpenCache(dir)
	if err != nil {
		s.log.Warn("compiling the filter in memory at every start", "err", err)
		c, _ = wasmtest.OpenCache(wasmtest.CacheOff)
	}
	return c
}

// Host is the proxy-wasm host serving the gateway.
func (s *Server) Host() *wasmtest.Host { return s.host }

// Stub is the built-in stub upstream, nil when the upstream is a URL.
func (s *Server) Stub() *stub.Stub { return s.stub }

// Admin is a management API client with the admin token.
func (s *Server) Admin() *api.Client {
	return &api.Client{BaseURL: s.acctURL, Token: s.opts.AdminToken, HTTP: s.client}
}

// Reload re-reads the config file into the accountant; the filters pick
// the new plan up at their next sync. A config that does not compile is
// rejected with every problem, and the plan in force stays.
func (s *Server) Reload() error { return s.acct.Reload() }

// Close is Shutdown with a background context.
func (s *Server) Close() error { return s.Shutdown(context.Background()) }

// Shutdown stops the system in order: the gateway stops accepting and lets
// in-flight requests finish (cutting them after ShutdownGrace or when ctx
// ends, which the filter settles as client resets), the filters' queued
// ledger rows are sent to the accountant, the worker VMs are shut down, and
// the accountant stops with its ledger flushed to disk. The error reports
// rows that could not be delivered or a ledger that failed to flush.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeOnce.Do(func() { s.closeErr = s.shutdown(ctx) })
	return s.closeErr
}

func (s *Server) shutdown(ctx context.Context) error {
	var errs []error
	grace, cancel := context.WithTimeout(ctx, ShutdownGrace)
	if err := s.gw.Shutdown(grace); err != nil {
		s.log.Warn("cutting the requests still in flight", "err", err)
		s.gw.Close()
	}
	cancel()
	<-s.gwDone
	stopped := time.Now()
	drain, cancel := context.WithTimeout(ctx, ShutdownGrace)
	if lag, err := s.drain(drain, stopped); err != nil {
		errs = append(errs, fmt.Errorf("devserver: %d ledger rows did not reach the accountant: %w", lag, err))
	}
	cancel()
	s.host.Close()
	s.acctStop()
	<-s.acctDone
	if s.reqLog != nil {
		s.reqLog.close() // the last rows are in: what waits is written
	}
	if s.acctErr != nil {
		errs = append(errs, fmt.Errorf("devserver: the accountant: %w", s.acctErr))
	}
	return errors.Join(errs...)
}

// abort tears down whatever a failed Start had started.
func (s *Server) abort() {
	if s.gw != nil {
		s.gw.Close()
		<-s.gwDone
	}
	if s.host != nil {
		s.host.Close()
	}
	if s.acctStop != nil {
		s.acctStop()
		<-s.acctDone
	}
	if s.reqLog != nil {
		s.reqLog.close()
	}
}
