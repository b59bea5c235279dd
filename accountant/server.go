// Package accountant owns the accountant process: it wires the state core
// (accountant/core), the durable ledger (accountant/ledgerlog), pricing,
// the counter store, the runtime plane (accountant/runtime) and the
// management API (accountant/api) behind one HTTP server:
//
//	POST /tt/internal/v1/ingest   ledger rows in, IngestAck after the durable commit
//	GET  /tt/internal/v1/sync     plan, keys, runtime plane, snapshot, prices (each only when changed)
//	POST /tt/internal/v1/lease    a replica's leases of its fleet limits, taken from the shared Redis
//	     /tt/api/v1/...           the management API
//	GET  /healthz                 200 unless the ledger's last commit failed
//	GET  /metrics                 Prometheus metrics
//
// On start it compiles the config (refusing to start on any problem),
// replays the ledger rows of the current periods into the core, and ticks
// the core every five seconds (the snapshot heartbeat). Reload re-reads the
// config: a config that does not compile is rejected with every problem
// logged, and the plan in force stays.
package accountant

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/accountant/core"
	"github.com/tokentriage/tokentriage/accountant/dashboard"
	"github.com/tokentriage/tokentriage/accountant/feed"
	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/accountant/pricing"
	"github.com/tokentriage/tokentriage/accountant/redisstore"
	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/accountant/spend"
	"github.com/tokentriage/tokentriage/accountant/store"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/sat"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// Options configure an accountant.
type Options struct {
	// ConfigPath is the tokentriage config file (YAML or JSON).
	ConfigPath string
	// DataDir holds decisions.jsonl (and its rotated files) and
	// governance.db.
	DataDir string
	// Listen is the address Run listens on (host:port).
	Listen string
	// AdminToken is the management API's admin bearer token; empty
	// disables admin access.
	AdminToken string
	// InternalToken is the bearer token every call to the internal plane
	// (ingest, sync, gate alerts, the runtime plane mirrors pull) must
	// carry; the filters send it as the plugin configuration's
	// accountant.token. Required.
	InternalToken string
	// Control is the base URL of the accountant that owns the fleet's
	// runtime plane (keys, nodes, overrides, admins, audit). Set, this
	// accountant mirrors it (see mirror.go); empty, it owns its own.
	Control string
	// Advertise is the base URL the fleet's other accountants reach this
	// one at (--advertise), announced to the owner with each pull and
	// listed by it, so a spend report from any accountant covers every
	// ledger. Empty: http:// and Listen, when Listen names a host.
	Advertise string
	// Promote lets an accountant started without Control own a
	// governance.db that mirrored another's plane: it keeps the copy and
	// writes it from now on. Without it such a start is refused.
	Promote bool
	// AcceptPlaneRollback starts on a governance.db that is behind its
	// checkpoint (a lost or damaged governance.db-wal), logging what was
	// lost, instead of refusing to start (--accept-plane-rollback).
	AcceptPlaneRollback bool
	// PricingFile extends or overrides the built-in price catalog.
	PricingFile string
	// AlertWebhook, when set, receives a JSON POST per threshold alert.
	AlertWebhook string
	// AlertFormat is the shape of the webhook's posts: AlertJSON (""),
	// AlertSlack or AlertTeams.
	AlertFormat string
	// SpendReport, "daily", posts a report of each UTC day's spend to
	// AlertWebhook after the day ends (by the runtime plane's owner only,
	// covering the fleet). "" sends none.
	SpendReport string
	// Logger receives operational logs. Nil: slog.Default().
	Logger *slog.Logger
	// Now is the clock. Nil: time.Now.
	Now func() time.Time

	// LedgerMaxFileBytes rotates decisions.jsonl at this size. Zero:
	// ledgerlog.DefaultMaxFileBytes.
	LedgerMaxFileBytes int64
	// Store holds the counters. Nil: a local store.
	Store store.Store
	// SpendHourlyDays is how many days before today the spend rollup keeps
	// hourly; older days are kept as daily sums. Zero:
	// spend.DefaultHourlyDays; negative: every hour is kept.
	SpendHourlyDays int
	// Redis is the shared Redis (HOST:PORT, --redis): it replaces
	// shared_state.redis.addr of the config, or adds it. Empty: the
	// config's, or none.
	Redis string
	// APIWriteRate and APIWriteBurst limit each admin's writes to the
	// management API (api.Deps.WriteRate): 0 is the default (20 a second
	// after 200 at once), a negative rate turns the limit off.
	APIWriteRate  float64
	APIWriteBurst int
	// OnRows, when set, is called with the rows of each ingest batch once
	// they are durable (the rows newly recorded; duplicates and rejected
	// lines are left out). The rows may share memory with the batch: copy
	// what is kept. tokentriage dev logs a line per request from them.
	OnRows func([]ledger.Row)
	// Collectors are registered on /metrics beside the accountant's own
	// (tokentriage dev adds the embedded gateway's filter stats).
	Collectors []prometheus.Collector
	// Debug are extra debug endpoints, served at /debug/tt/<name> to the
	// admin token only, beside Go's profiles at /debug/pprof/ (debug.go).
	Debug map[string]http.Handler
}

// MaxReplicas bounds the replicas tracked (by the ?replica= id of sync and
// ingest); past it the one heard from longest ago is forgotten, counted in
// tt_accountant_replicas_evicted_total.
const MaxReplicas = 4096

// LivenessWindow is how long a replica counts as live after its last sync.
const LivenessWindow = 30 * time.Second

// MaxIngestBytes bounds one ingest batch.
const MaxIngestBytes = 64 << 20

// Server is a running accountant.
type Server struct {
	opts    Options
	log     *slog.Logger
	now     func() time.Time
	pricing *pricing.Catalog
	prices  syncwire.Prices // the sync part of pricing
	ledger  *ledgerlog.Log
	// quarantine is the dead-letter file of rows ingest cannot accept.
	quarantine *quarantine
	db         *runtime.DB
	metrics    *metrics
	alerts     *alerter
	handler    http.Handler
	auth       *internalAuth
	lock       *os.File // the data directory's lock, held until Close
	// adjust holds the counters' resets and credits beside the store;
	// resets, on a mirror without Redis, what each reset took off this
	// accountant's own counters (see localResets), and replayed says the
	// ledger has rebuilt them.
	adjust   *adjusted
	resetsMu sync.Mutex
	resets   map[int64]int64
	replayed atomic.Bool
	// report is the daily spend report's state.
	report reporter
	// spend is the rollup spend reports read: the whole ledger, summed by
	// hour (see spend.go).
	spend      *spend.Rollup
	spendState spendState

	mu    sync.Mutex // guards core, plan, armed, the cached runtime plane
	core  *core.Core
	plan  *govern.Plan
	armed *govern.Armed
	// feed is the runtime plane's change feed cursor as of the last
	// refresh (what a filter holding everything reports).
	feed string
	rt   govern.Runtime
	// snapFeed is the spend snapshot's change feed.
	snapFeed *feed.Snapshot
	replicas map[string]replica
	// droppedGone keeps the dropped counts of replicas no longer tracked.
	droppedGone int64
	// replicasEvicted counts replicas forgotten because MaxReplicas were
	// tracked.
	replicasEvicted int64
	// since is the point each armed override was armed at (see
	// rollout.go), replaced on every arm; runtimeID is the governance.db
	// id of the runtime versions counted; planGen counts the plan hashes
	// armed, planGens the generation each hash was last armed at, and
	// armedPlan is the hash armed last.
	since     map[overrideKey]armedAt
	runtimeID string
	planGen   int64
	planGens  map[string]int64
	armedPlan string
	// orphanKeys is the set of live keys whose owner is not in the armed
	// tree, as logged last (noteOrphanKeysLocked).
	orphanKeys string

	// redis is the fleet's shared Redis; nil when the plan names none.
	// fleet is the counter store over it, and fleetStop ends its
	// publishing.
	redis     *redisstore.Client
	fleet     *redisstore.Fleet
	fleetStop context.CancelFunc
	redisLog  struct {
		sync.Mutex
		last  time.Time
		quiet int
	}
	// later keeps the tpm reconciles Redis did not take, sent again when
	// it is back.
	later struct {
		sync.Mutex
		reconciles []pendingReconcile
		hooked     bool
	}
	// restored are the rate lots counted again since Redis lost its data
	// (lease.go); lastReplicas the fleet's replica count as last read,
	// kept in fleet.json with the epoch (fleetStateMu).
	restored     restored
	lastReplicas atomic.Int64
	fleetStateMu sync.Mutex
	// mirror pulls the owner's plane when Options.Control is set; nil on
	// the owner. mirrors are the owner's mirrors, by name, with their
	// reports; watch is closed and replaced each time the plane moves,
	// waking the pulls waiting for it.
	mirror  *mirror
	mirrors map[string]mirrorSeen
	// members are the fleet's accountants as this one knows them (see
	// fleetspend.go); advertise the address it announces, name its name in
	// the owner's list, instance its process's id in spend shares.
	members fleetMembers
	// fleetFullLogged is when a full list of accountants was last logged
	// (under mu).
	fleetFullLogged time.Time
	// reloadWindow and reloadCount bound the mirror reloads written to the
	// audit log a minute (under mu).
	reloadWindow time.Time
	reloadCount  int
	// redatedLogged is when re-dated rows were last logged; redatedHeld
	// counts those since (under mu).
	redatedLogged time.Time
	redatedHeld   int
	advertise     string
	name          string
	instance      string
	peerClient    *http.Client
	watchMu       sync.Mutex
	watch         chan struct{}
	mirrorDone    chan struct{}
	stopping      chan struct{} // closed when Serve stops
	stopOnce      sync.Once

	closeOnce sync.Once
	closeErr  error
}

type replica struct {
	seen    time.Time
	dropped int64
	// polled: plan and runtime are what the replica's last poll reported
	// holding, as the plan generation and the position in the runtime
	// plane's change feed (-1 when it held none the accountant knows).
	polled        bool
	plan, runtime int64
}

// New opens the data directory, compiles the config, replays the ledger and
// returns a server ready to Run. Every config problem is in the error.
func New(opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.DataDir == "" {
		return nil, errors.New("accountant: no data directory; pass --data DIR")
	}
	if st, err := os.Stat(opts.DataDir); err == nil && !st.IsDir() {
		return nil, fmt.Errorf("accountant: the data directory %s is a file, not a directory; pass --data a directory (decisions.jsonl and governance.db live there)", opts.DataDir)
	}
	if opts.InternalToken == "" {
		return nil, errors.New("accountant: no internal token; set " + InternalTokenEnv + " or pass --internal-token-file FILE, and give the filters the same token (the plugin configuration's accountant.token or accountant.token_env)")
	}
	if opts.AlertWebhook != "" {
		if u, err := url.Parse(opts.AlertWebhook); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("accountant: the alert webhook %q is not an http(s) URL like https://hooks.example.com/tokentriage", opts.AlertWebhook)
		}
	}
	if err := CheckAlertFormat(cmp.Or(opts.AlertFormat, AlertJSON)); err != nil {
		return nil, fmt.Errorf("accountant: %w", err)
	}
	switch opts.SpendReport {
	case "", SpendReportDaily:
	default:
		return nil, fmt.Errorf("accountant: spend report %q is not daily (or none)", opts.SpendReport)
	}
	if opts.SpendReport != "" && opts.AlertWebhook == "" {
		return nil, errors.New("accountant: a spend report goes to the alert webhook; give --alert-webhook URL too")
	}
	owner := ""
	if opts.Control != "" {
		u, err := controlURL(opts.Control)
		if err != nil {
			return nil, err
		}
		owner = u
		if opts.Promote {
			return nil, errors.New("accountant: --promote makes this accountant the owner of its runtime plane and --control a mirror of another's; pass one of them")
		}
	}
	s := &Server{opts: opts, log: opts.Logger, now: opts.Now, replicas: map[string]replica{}, planGens: map[string]int64{}, mirrors: map[string]mirrorSeen{}, stopping: make(chan struct{}),
		instance: newInstanceID(), peerClient: &http.Client{}}
	adv, err := advertiseURL(opts)
	if err != nil {
		return nil, err
	}
	s.advertise = adv
	host, _ := os.Hostname()
	s.name = host + "/" + opts.Listen
	s.pricing = pricing.Default()
	if opts.PricingFile != "" {
		c, err := pricing.LoadFile(opts.PricingFile)
		if err != nil {
			return nil, fmt.Errorf("accountant: %w", err)
		}
		s.pricing = c
	}
	s.prices = pricesPart(s.pricing)
	plan, err := s.compile()
	if err != nil {
		return nil, err
	}
	s.plan = plan
	s.metrics = newMetrics(s)
	for _, c := range opts.Collectors {
		if err := s.metrics.reg.Register(c); err != nil {
			return nil, fmt.Errorf("accountant: registering a metrics collector: %w", err)
		}
	}
	s.auth = newInternalAuth(opts.InternalToken, opts.AdminToken, s.log, s.metrics.reg)
	s.alerts = newAlerter(opts.AlertWebhook, opts.AlertFormat, s.dashboardURL(), s.log, s.metrics)
	if err := s.openRedis(plan); err != nil {
		return nil, err
	}

	start := s.now()
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("accountant: creating the data directory: %w", err)
	}
	lock, err := lockDataDir(opts.DataDir)
	if err != nil {
		return nil, err
	}
	s.lock = lock
	st := opts.Store
	if st == nil && s.redis != nil {
		fleet, err := s.openFleet()
		if err != nil {
			lock.Close()
			return nil, err
		}
		st = fleet
	}
	if st == nil {
		st = store.NewLocal()
	}
	s.adjust = newAdjusted(st)
	s.core = core.New(core.Options{
		Pricing:       s.pricing,
		Store:         s.adjust,
		VersionPrefix: strconv.FormatInt(start.UnixNano(), 36),
	})
	s.snapFeed = feed.NewSnapshot(strconv.FormatInt(start.UnixNano(), 36) + "-" + s.instance)
	db, err := runtime.OpenWith(filepath.Join(opts.DataDir, "governance.db"), runtime.OpenOptions{
		AcceptRollback: opts.AcceptPlaneRollback,
		OnCheckpointError: func(err error) {
			s.log.Error("governance.db committed a write but its checkpoint could not be written; a lost governance.db-wal would go unnoticed until the next write succeeds", "err", err)
		},
	})
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("accountant: %w", err)
	}
	if rb := db.RolledBack(); rb != nil {
		s.log.Error("started on a rolled-back runtime plane (--accept-plane-rollback): the writes after the audit entry below are lost; keys minted since are gone, keys revoked since are valid again, until they are minted or revoked again",
			"governance_db", rb.Path, "audit_entry", rb.Seq, "checkpointed_entry", rb.WantSeq, "db_id", rb.DBID, "checkpointed_db_id", rb.WantDBID)
	}
	s.db = db
	if err := s.checkPlaneRole(owner); err != nil {
		db.Close()
		lock.Close()
		return nil, err
	}
	if owner != "" {
		s.mirror = newMirror(s, owner)
	}
	if err := s.refreshRuntime(); err != nil {
		db.Close()
		lock.Close()
		return nil, err
	}
	s.armLocked(start, false)

	lg, err := ledgerlog.Open(opts.DataDir, ledgerlog.Options{
		MaxFileBytes: opts.LedgerMaxFileBytes,
		Logger:       s.log,
		OnSync:       s.metrics.observeSync,
		OnError:      s.metrics.observeWriteError,
	})
	if err != nil {
		db.Close()
		lock.Close()
		return nil, fmt.Errorf("accountant: %w", err)
	}
	s.ledger = lg
	s.quarantine = newQuarantine(opts.DataDir, s.log, s.metrics.quarantined)
	s.spend = spend.New(spend.Options{HourlyDays: opts.SpendHourlyDays})
	replayed, err := s.replay(start)
	if err == nil {
		s.replayed.Store(true)
		s.spend.Compact(start)
		err = s.startSpend(replayed)
	}
	if err == nil && s.mirror != nil && s.redis == nil {
		// Resets that reached the copy while this accountant was down are
		// measured now that its counters are rebuilt.
		err = s.refreshRuntime()
	}
	if err == nil {
		err = s.startReports(start)
	}
	if err != nil {
		lg.Close()
		db.Close()
		lock.Close()
		return nil, err
	}
	s.tick()
	if s.mirror != nil {
		ctx, cancel := context.WithTimeout(context.Background(), FirstPullTimeout)
		s.mirror.refresh(ctx)
		cancel()
	}
	s.handler = s.routes()
	return s, nil
}

// Handler returns the accountant's HTTP handler (what Run serves).
func (s *Server) Handler() http.Handler { return s.handler }

// Registry returns the accountant's Prometheus registry.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+syncwire.IngestPath, s.internal(s.serveIngest))
	mux.HandleFunc("POST "+syncwire.AlertsPath, s.internal(s.serveAlerts))
	mux.HandleFunc("GET "+syncwire.SyncPath, s.internal(s.serveSync))
	mux.HandleFunc("POST "+syncwire.LeasePath, s.internal(s.serveLease))
	mux.HandleFunc("POST "+SpendPartialPath, s.internal(s.servePartial))
	mux.HandleFunc("POST "+PlanePath, s.servePlane)
	mux.HandleFunc("POST "+PlaneReloadPath, s.serveMirrorReload)
	mux.HandleFunc("GET /healthz", s.serveHealth)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	mux.Handle("GET "+dashboard.Prefix, dashboard.Handler())
	mux.Handle("GET "+strings.TrimSuffix(dashboard.Prefix, "/"), dashboard.Handler())
	mux.HandleFunc("/", serveNoRoute)
	s.debugRoutes(mux)
	mux.Handle(api.Prefix, s.forwardWrites(api.New(api.Deps{
		DB:          s.db,
		Armed:       s.Armed,
		Reload:      s.ReloadBy,
		Counters:    s.liveCounters,
		FleetRead:   s.fleetRead,
		Spend:       s.spendReport,
		SpendLimits: s.spendLimits,
		Changed:     s.Changed,
		Rollout:     s.Rollout,
		AdminToken:  s.opts.AdminToken,
		Now:         s.now,
		Logger:      s.log,
		Refused:     s.metrics.apiRefused,
		WriteRate:   s.opts.APIWriteRate,
		WriteBurst:  s.opts.APIWriteBurst,
	})))
	return mux
}

// Run serves on Options.Listen until ctx ends, ticking the core every
// core.HeartbeatInterval, then shuts the server down and closes the ledger
// (everything queued is flushed).
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		s.Close()
		return fmt.Errorf("accountant: listening on %s: %w", s.opts.Listen, err)
	}
	return s.Serve(ctx, ln)
}

// Serve is Run on a listener the caller opened.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("accountant listening", "addr", ln.Addr().String(), "data", s.opts.DataDir, "plan", s.planHash())
	t := time.NewTicker(core.HeartbeatInterval)
	defer t.Stop()
	if s.mirror != nil {
		s.mirrorDone = make(chan struct{})
		go func() {
			defer close(s.mirrorDone)
			s.mirror.run(ctx)
		}()
	}
	var serveErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-errc:
			serveErr = err
			break loop
		case <-t.C:
			s.tick()
		}
	}
	s.stopOnce.Do(func() { close(s.stopping) }) // pulls waiting at this owner answer now
	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && serveErr == nil {
		serveErr = err
	}
	if s.mirrorDone != nil {
		<-s.mirrorDone // ctx ended: the pulls stop before the database closes
	}
	if err := s.Close(); err != nil && serveErr == nil {
		serveErr = err
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

// Close flushes and closes the ledger and the runtime database. Ingest
// requests that arrive after Close fail.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.stopSpend()
		s.closeErr = s.ledger.Close()
		if err := s.db.Close(); err != nil && s.closeErr == nil {
			s.closeErr = err
		}
		s.alerts.close()
		s.report.wg.Wait() // a report being sent ends with the alerts' context
		s.lock.Close()     // releases the data directory
		if s.fleetStop != nil {
			s.fleetStop()
		}
		if s.redis != nil {
			s.redis.Close()
		}
	})
	return s.closeErr
}

// tick is the heartbeat: it advances the core (period rollover, dedup
// horizon, GeneratedAt) and forgets replicas past the liveness window.
func (s *Server) tick() {
	now := s.now()
	s.mu.Lock()
	alerts, err := s.core.Tick(now)
	for id, r := range s.replicas {
		if now.Sub(r.seen) > 10*LivenessWindow {
			s.droppedGone = sat.Add(s.droppedGone, r.dropped)
			delete(s.replicas, id)
		}
	}
	s.mu.Unlock()
	if err != nil {
		s.log.Error("accountant: counter store", "err", err)
	}
	s.alerts.emit(alerts)
	s.closeExpired(now)
	s.spend.Compact(now)
	s.maybeReport(now)
}

func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	if err := s.ledger.Err(); err != nil {
		http.Error(w, "ledger failed: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
	if s.mirror != nil {
		w.Write([]byte(s.mirror.status(s.now()) + "\n"))
	} else {
		w.Write([]byte(s.ownerStatus() + "\n"))
	}
}

// ownRoutes are the accountant's routes outside the management API, with
// the method each takes.
var ownRoutes = map[string]string{
	syncwire.IngestPath: http.MethodPost,
	syncwire.AlertsPath: http.MethodPost,
	syncwire.SyncPath:   http.MethodGet,
	syncwire.LeasePath:  http.MethodPost,
	PlanePath:           http.MethodPost,
	PlaneReloadPath:     http.MethodPost,
	"/healthz":          http.MethodGet,
	"/metrics":          http.MethodGet,
}

// serveNoRoute answers what no route matched with a JSON error: 405 (with
// Allow) for a known path called with the wrong method, 404 otherwise.
func serveNoRoute(w http.ResponseWriter, r *http.Request) {
	if m, ok := ownRoutes[r.URL.Path]; ok {
		allow := m
		if m == http.MethodGet {
			allow = "GET, HEAD"
		}
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: method not allowed; this route takes %s", r.Method, r.URL.Path, m))
		return
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s %s; the accountant serves POST %s, GET %s, POST %s, POST %s, GET /healthz, GET /metrics, the management API under %s and the spend dashboard at %s",
		r.Method, r.URL.Path, syncwire.IngestPath, syncwire.SyncPath, syncwire.AlertsPath, syncwire.LeasePath, api.Prefix, dashboard.Prefix))
}
