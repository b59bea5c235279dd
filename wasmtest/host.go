package wasmtest

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
)

// Config describes one plugin in one host: Envoy's PluginConfig and
// VmConfig, the clusters the plugin may call, and the upstream it guards.
type Config struct {
	// Module is the built .wasm (a Go wasip1 reactor, -buildmode=c-shared).
	Module []byte
	// PluginConfig is PLUGIN_CONFIGURATION (Envoy's config.configuration).
	PluginConfig []byte
	// VMConfig is VM_CONFIGURATION (vm_config.configuration).
	VMConfig []byte
	// VMID is vm_config.vm_id: the shared-data namespace.
	VMID string
	// PluginName and RootID are config.name and config.root_id.
	PluginName string
	RootID     string
	// Workers is the number of worker VMs (Envoy's --concurrency); 0 means 1.
	Workers int
	// FailOpen is config.fail_open: after a trap, streams pass through
	// unfiltered instead of being answered 503.
	FailOpen bool
	// AllowOnHeadersStopIteration is Envoy's PluginConfig field of that
	// name (Envoy 1.35 and later): a Pause from proxy_on_request_headers or
	// proxy_on_response_headers is StopIteration, so the headers wait,
	// still writable, while the body keeps coming to the filter's body
	// callbacks, and go on when one of them continues. Unset, a Pause is
	// StopAllIterationAndWatermark: the body is held back from the filter
	// too until it resumes the stream.
	AllowOnHeadersStopIteration bool
	// ReloadOnFailure replaces a failed worker VM with a fresh one at the
	// next request, like failure_policy FAIL_RELOAD (without backoff). The
	// stream that hit the trap still fails as FailOpen says.
	ReloadOnFailure bool
	// Clock is the time the filter sees; nil is RealClock().
	Clock Clock
	// PollOneoff is how WASI poll_oneoff answers: ENOSYS (the zero value)
	// or success with no event, as current proxy-wasm-cpp-host does.
	PollOneoff PollMode
	// PhaseCalls, when set, is what the guest may call while _initialize
	// and its allocator run; nil allows what cpp-host allows.
	PhaseCalls *PhaseCalls
	// Clusters are the names proxy_http_call may target.
	Clusters map[string]Cluster
	// Upstream is where requests go. Unset, every request the filter lets
	// through is answered 404 (route_not_found), as an Envoy route table
	// without a match would.
	Upstream Cluster
	// Env is vm_config.environment_variables: the WASI environment.
	Env map[string]string
	// Routes is the route table: the first route that matches a request
	// picks its cluster, and gives the xds.route_name and
	// xds.route_metadata properties. Empty, every request goes to Upstream.
	Routes []Route
	// Properties are extra property values keyed by their path, written as
	// segments joined by dots ("xds.cluster_name", "xds.node.id"), with a
	// segment that holds a dot as a quoted key in brackets
	// ("xds.listener_metadata.filter_metadata['envoy.lb'].zone"), or in
	// the wire form (segments joined by NUL). Values are the bytes the
	// filter reads (strings raw, integers 8-byte little-endian). Every
	// xds.* entry is also served at its older top-level name (node.id,
	// cluster_name, …) that SDKs before the xds attributes read.
	Properties map[string][]byte
	// StatTags are Envoy's stats_config.stats_tags: the tags Stats cuts
	// out of the plugin's stat names.
	StatTags []StatTag
	// Log receives a copy of every captured log line; nil keeps them only
	// in memory (Logs).
	Log io.Writer
	// LogLevel is the wasm logger's level: lines below it are dropped and
	// proxy_get_log_level returns it. The zero value, LogTrace, keeps all.
	LogLevel LogLevel
	// MaxLogs bounds the lines kept in memory; 0 means 4096.
	MaxLogs int
	// BufferLimit is the most a filter may buffer per direction (Envoy's
	// per_connection_buffer_limit_bytes); 0 means 1 MiB.
	BufferLimit int
	// MaxRequestHeadersCount and MaxRequestHeadersKB are the connection
	// manager's max_request_headers_count and max_request_headers_kb: a
	// request with more header fields, or more bytes of them (names,
	// values, the method and the request target), is answered 431 before
	// any filter sees it. 0 means Envoy's defaults, 100 and 60.
	MaxRequestHeadersCount int
	MaxRequestHeadersKB    int
	// MaxResponseHeadersCount and MaxResponseHeadersKB are the upstream
	// cluster's max_headers_count and max_response_headers_kb: an upstream
	// answer past them is a protocol error, answered 502 to the client as
	// Envoy's router does. 0 means 100 and 60.
	MaxResponseHeadersCount int
	MaxResponseHeadersKB    int
	// StreamIdleTimeout is the connection manager's stream_idle_timeout:
	// a stream with no bytes from the client or the upstream for this long
	// ends, 408 when no response has started, reset after. 0 means
	// DefaultStreamIdleTimeout (5 minutes); a negative value turns it off.
	StreamIdleTimeout time.Duration
	// RequestTimeout is request_timeout: a request not received whole
	// (headers to the end of its body) this long after its headers is
	// answered 408. 0 turns it off, Envoy's default.
	RequestTimeout time.Duration
	// Rand feeds WASI random_get; nil is crypto/rand.
	Rand io.Reader
	// ShutdownGrace is how long Close waits for a root context that
	// answered proxy_on_done with false to call proxy_done (its callouts
	// still answered meanwhile); 0 means 5 s.
	ShutdownGrace time.Duration
	// Cache keeps the module's compiled code; nil is the process's cache
	// over DefaultCacheDir, so that tests and `tokentriage dev` compile
	// each build of a module once per machine.
	Cache *Cache
}

// Host is an Envoy-like proxy-wasm host running one plugin in several
// worker VMs. It is an http.Handler: the embedded reverse proxy.
type Host struct {
	cfg            Config
	rt             wazero.Runtime
	compiled       wazero.CompiledModule
	abi            string
	clock          Clock
	logs           *logStore
	environ        []string
	randMu         sync.Mutex
	bufferLimit    int
	idleTimeout    time.Duration
	requestTimeout time.Duration
	reqLimits      headerLimits
	respLimits     headerLimits
	upstream       *target
	clusters       map[string]*target
	shared         *sharedStore
	metrics        *metricStore
	queues         *queueStore
	workers        []*worker
	rr             atomic.Uint64
	closing        chan struct{}
	closeOnce      sync.Once
	closed         atomic.Bool
	inflight       atomic.Int64
	idle           chan struct{}
	callouts       calloutTracker
	transport      *http.Transport
	retired        []*vm
	retiredMu      sync.Mutex
	slow           slowCalls // the slowest recent guest calls (profile.go)
	props          map[string][]byte
	routes         []*route
	statTags       []statTag

	// phaseInit and phaseAlloc count the imports called while
	// _initialize and the guest allocator ran (PhaseCallCounts).
	phaseMu               sync.Mutex
	phaseInit, phaseAlloc map[string]int
	allocations           atomic.Int64
}

var _ http.Handler = (*Host)(nil)

// worker is one worker slot; its VM may be replaced after a failure.
type worker struct {
	mu      sync.Mutex
	v       atomic.Pointer[vm]
	index   int
	reloads int
	// busy is the streams the proxy has on this worker (ServeHTTP).
	busy atomic.Int32
}

// newRuntime is a wazero runtime configured as every host's is, over the
// compilation cache cc.
func newRuntime(ctx context.Context) func(cc wazero.CompilationCache) wazero.Runtime {
	return func(cc wazero.CompilationCache) wazero.Runtime {
		// 16384 pages is V8's 1 GiB cap in Envoy (shared/proxy-wasm.md 3.1).
		return wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cc).WithMemoryLimitPages(16384))
	}
}

// compileModule compiles module in a new runtime, through cache (nil: the
// process's).
func compileModule(ctx context.Context, cache *Cache, module []byte) (wazero.Runtime, wazero.CompiledModule, error) {
	if cache == nil {
		cache = processCache()
	}
	rt, cm, err := cache.compile(ctx, module, newRuntime(ctx))
	if err != nil {
		rt.Close(ctx)
		return nil, nil, fmt.Errorf("wasmtest: compiling the module: %w", err)
	}
	return rt, cm, nil
}

// New compiles the module, starts a canary VM that is configured and then
// discarded (Envoy validates a plugin this way), and starts the worker VMs.
// A plugin that refuses its configuration fails New.
func New(ctx context.Context, cfg Config) (*Host, error) {
	if len(cfg.Module) == 0 {
		return nil, errors.New("wasmtest: Config.Module is empty: pass the bytes of the built .wasm (internal/testwasm.Filter)")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	h := &Host{
		cfg:            cfg,
		clock:          cfg.Clock,
		bufferLimit:    cfg.BufferLimit,
		reqLimits:      newHeaderLimits(cfg.MaxRequestHeadersCount, cfg.MaxRequestHeadersKB, "max_request_headers_count", "max_request_headers_kb"),
		respLimits:     newHeaderLimits(cfg.MaxResponseHeadersCount, cfg.MaxResponseHeadersKB, "max_headers_count", "max_response_headers_kb"),
		closing:        make(chan struct{}),
		idleTimeout:    cfg.StreamIdleTimeout,
		requestTimeout: cfg.RequestTimeout,
		idle:           make(chan struct{}, 1),
		shared:         newSharedStore(),
		metrics:        newMetricStore(),
		queues:         newQueueStore(),
		clusters:       map[string]*target{},
		transport:      NewProxyTransport(),
	}
	if h.clock == nil {
		h.clock = RealClock()
	}
	if h.bufferLimit <= 0 {
		h.bufferLimit = 1 << 20
	}
	if h.idleTimeout == 0 {
		h.idleTimeout = DefaultStreamIdleTimeout
	}
	maxLogs := cfg.MaxLogs
	if maxLogs <= 0 {
		maxLogs = 4096
	}
	h.logs = &logStore{level: cfg.LogLevel, clock: h.clock, w: cfg.Log, max: maxLogs}
	keys := make([]string, 0, len(cfg.Env))
	for k := range cfg.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h.environ = append(h.environ, k+"="+cfg.Env[k])
	}
	if cfg.Upstream.Handler != nil || cfg.Upstream.URL != "" {
		t, err := newTarget(cfg.Upstream, "upstream", h.transport)
		if err != nil {
			return nil, err
		}
		h.upstream = t
	}
	for name, c := range cfg.Clusters {
		t, err := newTarget(c, name, h.transport)
		if err != nil {
			return nil, err
		}
		h.clusters[name] = t
	}
	if err := h.compileRoutes(cfg.Routes); err != nil {
		return nil, err
	}
	tags, err := compileStatTags(cfg.StatTags)
	if err != nil {
		return nil, err
	}
	h.statTags = tags
	props, err := configProps(cfg.Properties)
	if err != nil {
		return nil, err
	}
	h.props = props

	rt, cm, err := compileModule(ctx, cfg.Cache, cfg.Module)
	if err != nil {
		return nil, err
	}
	h.rt, h.compiled = rt, cm
	ok := false
	defer func() {
		if !ok {
			h.rt.Close(context.Background())
		}
	}()
	if h.abi, err = abiOf(cm); err != nil {
		return nil, err
	}
	var imps []Import
	for _, d := range cm.ImportedFunctions() {
		m, n, _ := d.Import()
		imps = append(imps, Import{Module: m, Name: n, Params: d.ParamTypes(), Results: d.ResultTypes()})
	}
	if err := missingImports(imps, h.abi == abi021); err != nil {
		return nil, err
	}
	if err := registerHostModules(ctx, h.rt, h.abi == abi021); err != nil {
		return nil, err
	}

	canary, err := h.newVM(0, "canary")
	if err != nil {
		return nil, err
	}
	if err := canary.start(); err != nil {
		canary.discard()
		return nil, err
	}
	canary.discard()

	for i := 1; i <= cfg.Workers; i++ {
		// Starting many workers takes a while (tens of milliseconds and
		// megabytes each): a cancelled start stops at the next one.
		var v *vm
		err := ctx.Err()
		if err != nil {
			err = fmt.Errorf("wasmtest: starting worker %d of %d: %w", i, cfg.Workers, err)
		} else {
			v, err = h.newVM(i, fmt.Sprintf("worker %d", i))
		}
		if err == nil {
			err = v.start()
			if err != nil {
				v.discard()
			}
		}
		if err != nil {
			for _, w := range h.workers {
				w.v.Load().discard()
			}
			return nil, err
		}
		w := &worker{index: i}
		w.v.Store(v)
		h.workers = append(h.workers, w)
	}
	ok = true
	return h, nil
}

// pickVM returns the VM of worker n (1-based), or the next worker in turn
// when n is 0. A failed VM is replaced first when ReloadOnFailure is set.
func (h *Host) pickVM(n int) *vm {
	if n <= 0 || n > len(h.workers) {
		n = int(h.rr.Add(1)-1)%len(h.workers) + 1
	}
	return h.workerVM(h.workers[n-1])
}

// leastBusy is the first worker with no stream in flight whose VM is not
// running a call (a tick, a callout's answer), else the worker with the
// fewest streams in flight, the first on a tie: how the proxy (ServeHTTP)
// spreads requests. At a low rate one worker serves them all, so one VM's
// memory and its compiled code stay in the CPU's caches between requests
// and its ledger rows leave together, and a request does not wait behind a
// tick or a sync answer another VM is free to skip; under load every
// worker takes its share, as Envoy's busy worker threads do.
func (h *Host) leastBusy() *worker {
	var best *worker
	low := int32(math.MaxInt32)
	for _, w := range h.workers {
		b := w.busy.Load()
		if b == 0 && w.free() {
			return w
		}
		if b < low {
			best, low = w, b
		}
	}
	return best
}

// free reports whether w's VM is running no call at this instant.
func (w *worker) free() bool {
	v := w.v.Load()
	if !v.mu.TryLock() {
		return false
	}
	v.mu.Unlock()
	return true
}

// workerVM is w's VM, reloaded first if it failed and the host reloads.
func (h *Host) workerVM(w *worker) *vm {
	v := w.v.Load()
	if v.failed.Load() && h.cfg.ReloadOnFailure {
		v = h.reload(w)
	}
	return v
}

func (h *Host) reload(w *worker) *vm {
	w.mu.Lock()
	defer w.mu.Unlock()
	old := w.v.Load()
	if !old.failed.Load() {
		return old
	}
	select {
	case <-h.closing:
		return old
	default:
	}
	nv, err := h.newVM(w.index, fmt.Sprintf("worker %d (reload %d)", w.index, w.reloads+1))
	if err == nil {
		if err = nv.start(); err != nil {
			nv.discard()
		}
	}
	if err != nil {
		h.logs.add(w.index, old.name, LogError, "reloading the failed vm: "+err.Error())
		return old
	}
	w.reloads++
	w.v.Store(nv)
	h.retiredMu.Lock()
	h.retired = append(h.retired, old)
	h.retiredMu.Unlock()
	return nv
}

// Close shuts the host down: it waits for in-flight streams, then every
// root context gets proxy_on_done and proxy_on_delete; one that answers
// on_done with false is given until it calls proxy_done (at most
// ShutdownGrace), its callouts answered meanwhile. Then what callouts
// remain are cancelled and the VMs are freed.
func (h *Host) Close() error {
	h.closeOnce.Do(func() {
		h.closed.Store(true)
		close(h.closing)
		for h.inflight.Load() > 0 {
			<-h.idle
		}
		// The workers end together: each may wait out a grace period
		// for its root context to finish.
		var wg sync.WaitGroup
		for _, w := range h.workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.mu.Lock()
				w.v.Load().shutdown(h.shutdownGrace())
				w.mu.Unlock()
			}()
		}
		wg.Wait()
		h.retiredMu.Lock()
		for _, v := range h.retired {
			v.discard()
		}
		h.retiredMu.Unlock()
		h.callouts.wait(context.Background())
		h.rt.Close(context.Background())
		h.transport.CloseIdleConnections()
	})
	return nil
}

// enter admits a stream unless the host is closing; leave lets Close know
// when the last one is gone.
func (h *Host) enter() bool {
	h.inflight.Add(1)
	if h.closed.Load() {
		h.leave()
		return false
	}
	return true
}

func (h *Host) leave() {
	if h.inflight.Add(-1) == 0 && h.closed.Load() {
		select {
		case h.idle <- struct{}{}:
		default:
		}
	}
}

func (h *Host) fillRandom(b []byte) error {
	if h.cfg.Rand == nil {
		_, err := crand.Read(b)
		return err
	}
	h.randMu.Lock()
	defer h.randMu.Unlock()
	_, err := io.ReadFull(h.cfg.Rand, b)
	return err
}

// Workers reports how many worker VMs the host runs.
func (h *Host) Workers() int { return len(h.workers) }

// Failed reports whether worker n's current VM (1-based) has failed, and why.
func (h *Host) Failed(n int) (bool, string) {
	if n <= 0 || n > len(h.workers) {
		return false, ""
	}
	v := h.workers[n-1].v.Load()
	if !v.failed.Load() {
		return false, ""
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return true, v.failure
}

// Logs returns the captured log lines, oldest first.
func (h *Host) Logs() []LogEntry { return h.logs.snapshot() }

// Clock returns the host's clock.
func (h *Host) Clock() Clock { return h.clock }

// WaitCallouts waits until no HTTP callout is in flight: every call made so
// far has been delivered, cancelled or failed.
func (h *Host) WaitCallouts(ctx context.Context) error { return h.callouts.wait(ctx) }

// MemoryPages reports the linear memory size of worker n (1-based), in
// 64 KiB pages.
func (h *Host) MemoryPages(n int) uint32 {
	if n <= 0 || n > len(h.workers) {
		return 0
	}
	v := h.workers[n-1].v.Load()
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.mem.Size() / 65536
}

func (h *Host) shutdownGrace() time.Duration {
	if h.cfg.ShutdownGrace > 0 {
		return h.cfg.ShutdownGrace
	}
	return 5 * time.Second
}
