package accountant

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tokentriage/tokentriage/accountant/core"
)

// metrics are the accountant's Prometheus metrics, on a registry of its
// own (several accountants can live in one test process).
type metrics struct {
	reg        *prometheus.Registry
	ingested   prometheus.Counter
	requests   prometheus.Counter
	duplicates prometheus.Counter
	rejected   prometheus.Counter
	unpriced   prometheus.Counter
	foldLag    prometheus.Gauge
	alerts     *prometheus.CounterVec
	reloads    *prometheus.CounterVec
	fsync      prometheus.Histogram
	ledgerOut  prometheus.Counter
	batches    prometheus.Counter
	failed     prometheus.Counter
	failedB    prometheus.Counter
	suspended  prometheus.Counter
	// fleetRefused counts accountants the owner did not list (its list
	// full); shareRefused, shares of a fleet report left out as
	// implausible or too large.
	redated      prometheus.Counter
	refusedAPI   *prometheus.CounterVec
	fleetRefused prometheus.Counter
	shareRefused prometheus.Counter
	// quarantined counts the rows ingest wrote to the dead-letter file.
	quarantined prometheus.Counter
	closed      prometheus.Counter
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "tt", Subsystem: "accountant", Name: name, Help: help})
		m.reg.MustRegister(c)
		return c
	}
	m.ingested = f("rows_ingested_total", "Ledger rows newly recorded (durable before acknowledged).")
	m.requests = f("requests_recorded_total", "Requests the recorded rows stand for: a summary row its count, a call's start none, its close one, a late end none more than the estimate it replaces. What was served, once recorded.")
	m.duplicates = f("rows_deduplicated_total", "Ledger rows already recorded, acknowledged without counting again.")
	m.rejected = f("rows_rejected_total", "Ledger rows rejected as unreadable or too old to deduplicate.")
	m.unpriced = f("rows_unpriced_total", "Recorded rows whose model has no price in the catalog (UNPRICED: no dollars added).")
	m.ledgerOut = f("ledger_bytes_written_total", "Bytes appended to decisions.jsonl since start.")
	m.batches = f("ledger_batches_total", "Ingest batches made durable.")
	m.suspended = f("admit_suspended_total", "Admit calls the shared Redis did not decide (none configured, down, or past the deadline): the filter answered with its local limiter and said suspended.")
	m.failed = f("ledger_write_failures_total", "Group commits to decisions.jsonl that failed (a write or fsync error: a full disk, an I/O error); their batches were answered 503 and are sent again.")
	m.refusedAPI = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tt", Subsystem: "accountant", Name: "api_refusals_total",
		Help: "Management API calls refused, by status: 401 (a token that opens nothing), 403 (a delegated admin outside its subtree or on an admin-only route)."}, []string{"status"})
	m.reg.MustRegister(m.refusedAPI)
	m.redated = f("rows_redated_total", "Ledger rows whose end lay more than 5 minutes ahead of, or 15 minutes behind, the accountant's clock, re-dated to it (a gateway's clock is off, or someone dates rows at will).")
	m.fleetRefused = f("fleet_members_refused_total", "Pulls announcing an accountant the owner did not list: MaxFleetAccountants were listed, each heard from within a day.")
	m.shareRefused = f("fleet_shares_refused_total", "Other accountants' shares of a fleet spend report left out: larger than MaxPartialAnswer, or holding what their accountant cannot have recorded.")
	m.quarantined = f("rows_quarantined_total", "Ingested rows the accountant can never accept (not a ledger row, a row that fails its checks, one older than the deduplication horizon), written to quarantine.jsonl in the data directory and acknowledged, so nothing sends them again.")
	m.closed = f("calls_closed_total", "Calls whose start was recorded and whose end never came within their lease_ttl (their proxy died), closed at their reserved estimate, marked estimated.")
	m.failedB = f("ledger_batches_failed_total", "Ingest batches whose commit failed (answered 503, not counted).")
	m.foldLag = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "tt", Subsystem: "accountant", Name: "fold_lag_seconds",
		Help: "Time between the end of the latest row of the last batch and its fold."})
	m.alerts = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tt", Subsystem: "accountant", Name: "threshold_alerts_total",
		Help: "Threshold alerts raised, by limit."}, []string{"limit_id"})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tt", Subsystem: "accountant", Name: "config_reloads_total",
		Help: "Config reloads, by result (applied, rejected)."}, []string{"result"})
	m.fsync = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "tt", Subsystem: "accountant", Name: "ledger_fsync_seconds",
		Help: "Duration of each group-commit fsync.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)})
	m.reg.MustRegister(m.foldLag, m.alerts, m.reloads, m.fsync)
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "tt", Subsystem: "accountant", Name: "snapshot_age_seconds",
			Help: "Age of the published snapshot (time since its GeneratedAt)."}, func() float64 {
			s.mu.Lock()
			snap, err := s.core.Snapshot()
			s.mu.Unlock()
			if err != nil || snap.GeneratedAt.IsZero() {
				return 0
			}
			return s.now().Sub(snap.GeneratedAt).Seconds()
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "tt", Subsystem: "accountant", Name: "rows_dropped_reported",
			Help: "Ledger rows the filters report having dropped (their buffers overflowed), summed over replicas."}, func() float64 {
			return float64(s.droppedReported())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "tt", Subsystem: "accountant", Name: "replicas_live",
			Help: "Filter replicas that polled within the liveness window."}, func() float64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			return float64(s.liveReplicasLocked(s.now()))
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "tt", Subsystem: "accountant", Name: "replicas_evicted_total",
			Help: "Replicas forgotten because the most that are tracked (MaxReplicas) were: a flood of made-up replica ids."}, func() float64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			return float64(s.replicasEvicted)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "tt", Subsystem: "accountant", Name: "ledger_failing",
			Help: "1 while the last group commit to decisions.jsonl failed (ingest answers 503), 0 once one succeeds."}, func() float64 {
			if s.ledger != nil && s.ledger.Err() != nil {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "tt", Subsystem: "accountant", Name: "ledger_active_file_bytes",
			Help: "Size of decisions.jsonl."}, func() float64 {
			_, active := s.ledger.Written()
			return float64(active)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "tt", Subsystem: "accountant", Name: "dedup_ids",
			Help: "Request ids held for deduplication."}, func() float64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			return float64(s.core.Stats().DedupIDs)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "tt", Subsystem: "accountant", Name: "overflowed_rows_total",
			Help: "Rows folded into a limit's overflow counter: their value (a model, customer or tag) was past the limit's max_distinct."}, func() float64 {
			return float64(s.CoreStats().Overflowed)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "tt", Subsystem: "accountant", Name: "upstream_refused_rows_total",
			Help: "Forwarded rows the upstream refused (4xx, 5xx) with nothing spent: recorded, folded into no counter."}, func() float64 {
			return float64(s.CoreStats().UpstreamRefused)
		}),
		collectors.NewGoCollector(),
	)
	return m
}

// observeIngest counts a batch: admitted is what Admit said of it, folded
// what Commit did with its rows (nothing when the commit failed).
func (m *metrics) observeIngest(admitted, folded core.Result, unreadable int, now time.Time) {
	m.ingested.Add(float64(folded.Accepted))
	m.requests.Add(float64(folded.Requests))
	m.duplicates.Add(float64(admitted.Duplicates))
	m.rejected.Add(float64(admitted.Rejected + unreadable))
	m.unpriced.Add(float64(folded.Unpriced))
	if !folded.MaxEnd.IsZero() {
		m.foldLag.Set(now.Sub(folded.MaxEnd).Seconds())
	}
}

func (m *metrics) observeWriteError(_ error, batches int) {
	m.failed.Inc()
	m.failedB.Add(float64(batches))
}

func (m *metrics) observeSync(d time.Duration, bytes, batches int) {
	m.fsync.Observe(d.Seconds())
	m.ledgerOut.Add(float64(bytes))
	m.batches.Add(float64(batches))
}

// apiRefused counts a management API call refused with status.
func (m *metrics) apiRefused(status int) {
	m.refusedAPI.WithLabelValues(strconv.Itoa(status)).Inc()
}
