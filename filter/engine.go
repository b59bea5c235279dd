package filter

import (
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tokentriage/tokentriage/shared/jsontok/jv"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/pluginconf"
	"github.com/tokentriage/tokentriage/shared/pricing"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// Engine is one VM's governance state: the plan in force, the key table,
// the spend snapshot, the ledger queue, and the compare-and-swap cells it
// shares with the other VMs of the host. A VM runs one callback at a time,
// so an Engine is never used concurrently.
type Engine struct {
	cfg   *pluginconf.Config
	host  Host
	cells cells
	rng   *rand.ChaCha8
	vm    uint32
	// replica names the host process (shared by its VMs) on ledger rows and
	// sync polls.
	replica string

	syncEvery, flushEvery, leaseTTL time.Duration

	// What is armed. static is the plan of the plugin configuration, when
	// it carries one; otherwise plan comes from the accountant. The plan
	// is armed with the config's tree alone: the runtime plane's nodes and
	// overrides are looked up per request, for the nodes of its chain.
	static     *govern.Plan
	plan       *govern.Plan
	armed      *govern.Armed
	staticKeys staticKeys
	prices     map[string]pricing.Rates // the accountant's catalog, by lowercase name and alias
	replicas   int
	sync       syncState

	// The synced tables in shared data (table.go, state.go): their
	// layouts and the change log record last read, the VM's bounded cache
	// of what it decoded from them, the hash key, and scratch.
	tabs    [numTables]layout
	logSeq  uint64
	cache   caches
	seed    [2]uint64
	keyBuf  []byte
	probeBk bucket
	// The polling VM's scratch: table writers, a record, the change log.
	tw     [numTables]tableWriter
	recBuf []byte
	clog   changeLog
	// fleetDown is set while the fleet store (the leases in the shared
	// Redis) is not deciding, as this VM last saw it: its transitions are
	// logged once.
	fleetDown bool
	// fleetStore: the accountant has the fleet's shared Redis, so reserve
	// mode and concurrency under store: share decide on leases.
	fleetStore bool
	// asks are this VM's lease calls that requests wait on, refills its
	// calls ahead of need, by lease cell; leasesSeen the leases it uses
	// (renewed by its tick, leaseTicked).
	asks, refills map[string]*leaseAsk
	leasesSeen    map[string]govern.Instance
	leaseTicked   time.Time
	// unclaimed are the asks whose answers were not heard, by lease cell:
	// the next ask for the cell goes under the same id (askSeq numbers
	// this VM's asks).
	unclaimed map[string]string
	askSeq    uint64
	// missLogged is when a lease call's missed deadline was last logged.
	missLogged time.Time
	// spendHeld is what this VM's calls in flight hold per reserve-mode
	// spend cell (its tick refreshes those holds' expiry).
	spendHeld map[string]int64

	rows           rowQueue
	totals         totals        // rows folded while the queue is full (overflow.go)
	unauth         unauthSampler // unauthenticated refusals past the sampling rate
	open           []openCall    // calls in flight, for their start rows (startrow.go)
	kinds          rowKinds      // the row kinds the accountant reads
	finishing      func()        // set while Finish sends the last rows
	finishFailures int           // sends Finish made in a row that failed
	row            ledger.Row    // the row being encoded
	ingestHeaders  [][2]string
	alerts         []byte // threshold alerts for the accountant, JSON lines
	alertCount     int
	lastRefresh    time.Time // of lease expiries and tee stats
	teeLag         int64
	teeDropped     uint64
	teeDropAt      int64 // the last drop published
	teeOldest      int64 // the oldest unacknowledged row published
	queuedShown    int64 // tokentriage.ledger.rows_queued as last set
	// hostDropAt is the latest row dropped by any VM of the host, and
	// hostOldest the oldest row another VM holds unacknowledged, as of the
	// last tick; the counts below and dropLogNext pace the queue's log.
	hostDropAt, hostOldest         int64
	dropLogged, cutLogged          uint64
	foldedRows, foldLogged         uint64
	summedRows, sumLogged, cutRows uint64
	dropLogNext                    time.Time

	free []*Stream // finished streams, reused
	inst []govern.Instance
	// fbInst are the gate-2 instances of a request's fallback model.
	fbInst []govern.Instance
	facts  []govern.NodeFacts // the runtime plane's say on the chain resolved
	// resolveGen moves whenever what a chain resolves to may have changed
	// (a plan armed; a sync that moved the plan, the runtime plane's
	// nodes and overrides, or the keys), so the
	// instances a key's entry kept from an earlier request are resolved
	// again (resolveGate).
	resolveGen uint64
	// resolvedBy are the keys whose entries keep resolved instances, in
	// the order they came (keepResolved): at most resolvedKeys of them.
	resolvedBy   [resolvedKeys]*keyEntry
	resolvedNext int
	// spans are the current spans of the calendar periods met lately
	// (periodStart), replaced in turn.
	spans    [8]periodSpan
	spanNext uint8
	// fields and paths are scratch for the body fields gate 2 reads
	// (attributes).
	fields []jv.Value
	paths  []string
	buf    []byte
	// Scratch for what a callback hands the binding, which applies it
	// before the next callback.
	// holdSeen: a request held at its headers received its body, so the
	// host honours hold_headers. holdBrokenAt: when a held request last went
	// HoldGrace without a body in a VM where none ever had one (zero while
	// holding works); holdProbeAt: when a request was last held to try
	// again (hold.go).
	holdSeen                  bool
	holdBrokenAt, holdProbeAt time.Time

	removeScratch []string
	setScratch    [][2]string
	addScratch    [][2]string
	pairs         [][2]string // the binding's header map rewrites
	// chunk receives request and response bodies from the host, read and
	// used within one callback, so reading a body allocates nothing.
	chunk []byte
}

// maxChunkScratch bounds the body buffer an engine keeps: SSE chunks and
// typical request bodies fit; a larger body gets a block of its own.
const maxChunkScratch = 64 << 10

// keepChunk adopts b as the body buffer when it outgrew the current one
// and is not too large to keep.
func (e *Engine) keepChunk(b []byte) {
	if cap(b) > cap(e.chunk) && cap(b) <= maxChunkScratch {
		e.chunk = b[:0]
	}
}

// NewEngine starts a VM's engine from the decoded plugin configuration. It
// may use shared data (the VM is configured, not initializing).
func NewEngine(cfg *pluginconf.Config, h Host) (*Engine, error) {
	if h.Store == nil || h.Now == nil || h.Metrics == nil {
		return nil, fmt.Errorf("filter: engine: host is missing its store, clock or metrics")
	}
	if h.Log == nil {
		h.Log = func(LogLevel, string) {}
	}
	e := &Engine{
		cfg:           cfg,
		host:          h,
		rng:           rand.NewChaCha8(h.Seed),
		syncEvery:     cfg.SyncEvery(),
		flushEvery:    cfg.FlushEvery(),
		leaseTTL:      cfg.LeaseTimeout(),
		replicas:      1,
		ingestHeaders: [][2]string{{"content-type", "application/x-ndjson"}},
		inst:          make([]govern.Instance, 0, 16),
		removeScratch: make([]string, 0, 8),
		setScratch:    make([][2]string, 0, 3),
		addScratch:    make([][2]string, 0, 8),
		chunk:         make([]byte, 0, 4096),
	}
	e.vm = uint32(e.rng.Uint64()) | 1 // never 0: 0 marks a free lock
	e.cells = cells{store: h.Store, vm: e.vm, held: map[string]*gaugeHold{}}
	replica, err := e.ensureReplica()
	if err != nil {
		return nil, fmt.Errorf("filter: engine: naming the replica: %w", err)
	}
	e.replica = replica
	if err := e.ensureSeed(); err != nil {
		return nil, fmt.Errorf("filter: engine: drawing the table hash key: %w", err)
	}
	e.staticKeys = buildStaticKeys(cfg.Keys)
	e.cache.keys.max, e.cache.nodes.max, e.cache.counters.max = keyCacheMax, nodeCacheMax, counterCacheMax
	if cfg.Plan != nil {
		e.static = cfg.Plan
		e.arm(cfg.Plan)
	}
	// Pick up whatever another VM of this host already synced.
	e.refresh(h.Now())
	return e, nil
}

// replicaKey holds the host process's replica name, created once.
const replicaKey = "tt/replica"

func (e *Engine) ensureReplica() (string, error) {
	var raw [10]byte
	binary.LittleEndian.PutUint64(raw[:], e.rng.Uint64())
	binary.LittleEndian.PutUint16(raw[8:], uint16(e.rng.Uint64()))
	name := "r-" + lowerBase32.EncodeToString(raw[:])
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		v, cas, found, err := e.host.Store.Get(replicaKey)
		if err != nil {
			return "", err
		}
		if found && len(v) > 1 {
			return string(v), nil
		}
		// Missing (or unreadable): propose this VM's name; the first
		// proposal to land names the replica for every VM.
		if _, err := e.cells.setNew(replicaKey, []byte(name), cas, found); err != nil {
			return "", err
		}
	}
	return "", errContention
}

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ensureSeed reads the host's table hash key, drawing it when this is the
// first VM: the first proposal to land is every VM's.
func (e *Engine) ensureSeed() error {
	var raw [16]byte
	binary.LittleEndian.PutUint64(raw[:], e.rng.Uint64())
	binary.LittleEndian.PutUint64(raw[8:], e.rng.Uint64())
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		v, cas, found, err := e.host.Store.Get(syncSeedKey)
		if err != nil {
			return err
		}
		if found && len(v) == 16 {
			e.seed = [2]uint64{binary.LittleEndian.Uint64(v), binary.LittleEndian.Uint64(v[8:])}
			return nil
		}
		if _, err := e.cells.setNew(syncSeedKey, raw[:], cas, found); err != nil {
			return err
		}
	}
	return errContention
}

// arm makes plan the plan in force, armed with the config's tree: the
// runtime plane comes in per request (chainFacts).
func (e *Engine) arm(plan *govern.Plan) {
	armed, problems := plan.Arm(govern.Runtime{})
	for _, p := range problems {
		e.logf(LogWarn, "governance: %s: %s", p.Path, p.Message)
	}
	e.plan, e.armed = plan, armed
	e.resolveGen++
}

// active reports whether governance is armed and enabled.
func (e *Engine) active() bool { return e.armed != nil && e.plan.Enabled }

// Tick runs the VM's periodic work: the accountant poll (one VM of the host
// at a time), the ledger flush, lease expiry refresh, and picking up what
// another VM synced.
func (e *Engine) Tick() {
	now := e.host.Now()
	e.refresh(now)
	e.poll(now)
	e.queueUnauth(now, false)
	e.drainTotals(now)
	e.flushRows(now, e.rows.full())
	e.setQueued()
	if at := e.sync.loaded.generatedAt; !at.IsZero() {
		e.host.Metrics.Set(GaugeSyncAge, int64(now.Sub(at)/time.Second))
	}
	e.sendAlerts()
	e.leaseTick(now)
	// The entries this VM holds in gauges, spend cells and the tee cell
	// are refreshed a third of their lifetime apart; the tee cell also
	// when this VM's queue moved (most ticks under traffic), alone: the
	// others (a get and a set each) were refreshed with it every tick.
	if now.Sub(e.lastRefresh) >= e.leaseTTL/3 {
		e.cells.gaugeRefreshAll(now, e.leaseTTL)
		e.refreshSpendHolds(now)
		e.publishTee(now)
		e.lastRefresh = now
	} else if e.teeChanged() {
		e.publishTee(now)
	}
	if e.host.Caller != nil {
		e.readDrops(now)
		e.logDrops(now)
	}
	if r := e.cells.retries; r > 0 {
		e.host.Metrics.Add(MetricCASRetries, r)
		e.cells.retries = 0
	}
}

// TickPeriod is how often the host should call Tick.
func (e *Engine) TickPeriod() time.Duration { return e.cfg.TickEvery() }

// newRequestID draws a tt_ request id from the VM's generator (seeded once
// from the host's random source: no host call per request).
func (e *Engine) newRequestID() string {
	var raw [16]byte
	binary.LittleEndian.PutUint64(raw[:], e.rng.Uint64())
	binary.LittleEndian.PutUint64(raw[8:], e.rng.Uint64())
	return wire.NewRequestID(raw)
}

func (e *Engine) logf(level LogLevel, format string, args ...any) {
	e.host.Log(level, fmt.Sprintf(format, args...))
}
