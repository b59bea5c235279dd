package filter

import (
	"time"
)

// Host is what the gate needs from the proxy-wasm host, behind narrow
// interfaces: the binding (context.go) fills it with shared data, the WASI
// clock, HTTP callouts and Envoy metrics; native tests fill it with fakes.
type Host struct {
	Store Store
	// Caller reaches the accountant cluster; nil when none is configured.
	Caller Caller
	Now    func() time.Time
	// Seed seeds the VM's generator for its id and request ids (read once
	// at start from the host's random source).
	Seed    [32]byte
	Metrics Metrics
	Log     func(level LogLevel, msg string)
	// Upstream names where the current request went (Envoy's
	// upstream.address, else its cluster), for log lines about what the
	// upstream answered; nil or "" when the host cannot tell. Called only
	// on such rare paths, from the request's own callbacks.
	Upstream func() string
}

// LogLevel is a proxy-wasm log level.
type LogLevel int

const (
	LogDebug LogLevel = 1
	LogInfo  LogLevel = 2
	LogWarn  LogLevel = 3
	LogError LogLevel = 4
)

// Metrics counts events. The binding maps each Metric to an Envoy counter
// defined once per VM; counters aggregate across a host's workers.
type Metrics interface {
	Add(m Metric, n uint64)
	// Refused counts one refusal by the limit that refused it, on a stat
	// whose name carries the limit's id and type as tags (RefusalStat).
	Refused(limitID, limitType string)
	// Set sets a gauge to this VM's value; GaugeNames says how the VMs'
	// values combine.
	Set(g Gauge, v int64)
}

// Gauge names one gauge.
type Gauge int

const (
	// GaugeRowsQueued is the ledger rows a VM holds that the accountant has
	// not acknowledged; the host's stat is the sum over its VMs.
	GaugeRowsQueued Gauge = iota
	// GaugeSyncAge is the age in seconds of the accountant's snapshot the
	// VM decides on (the same for every VM of a host).
	GaugeSyncAge
	gaugeCount
)

// GaugeNames are the Envoy stat names, indexed by Gauge.
var GaugeNames = [gaugeCount]string{
	GaugeRowsQueued: "tokentriage.ledger.rows_queued",
	GaugeSyncAge:    "tokentriage.sync.age_seconds",
}

// RefusalStat is the name of the counter of refusals by one limit. The tags
// are spelled as Istio's stats plugin spells them (name=.=value;.;), so
// Envoy's tag extraction (stats_config.stats_tags with the regexes
// `(limit_id=\.=(.+?);\.;)` and `(limit_type=\.=(.+?);\.;)`, or Istio's
// extraStatTags: [limit_id, limit_type]) turns them into labels, and
// Prometheus sees tokentriage_refusals{limit_id="team_rpm",limit_type="rpm"}.
// Limit ids are [a-z0-9_], so they never break the spelling.
func RefusalStat(limitID, limitType string) string {
	return "limit_id=.=" + limitID + ";.;limit_type=.=" + limitType + ";.;tokentriage.refusals"
}

// StatTags are the tag extraction rules (Envoy's stats_config.stats_tags)
// that turn the tags RefusalStat spells into labels; envoy/envoy.yaml and
// tokentriage dev use these.
var StatTags = []struct{ Name, Regex string }{
	{"limit_id", `(limit_id=\.=(.+?);\.;)`},
	{"limit_type", `(limit_type=\.=(.+?);\.;)`},
}

// Metric names one counter.
type Metric int

const (
	MetricAdmitted Metric = iota
	MetricRefusedBudget
	MetricRefusedQuotaTokens
	MetricRefusedQuotaRequests
	MetricRefusedRPM
	MetricRefusedTPM
	MetricRefusedConcurrency
	MetricRejected // 401, 403, 400, 413, 503: refusals that are not a limit breach
	MetricShadowRefused
	MetricSoftBreach
	MetricSuspended
	MetricCASRetries
	MetricRowsSent
	MetricRowsDropped
	MetricSyncOK
	MetricSyncFailed
	MetricPlanMismatch
	MetricThresholdAlerts
	MetricServedOutOfScope
	MetricUsageClamped
	MetricPassthrough
	MetricEndpointVariant
	MetricRowsFolded
	MetricRefusalsSummed
	MetricRowsQuarantined
	MetricRowsCut
	MetricStartsSent
	MetricOverflow
	MetricFallback
	metricCount
)

// MetricNames are the Envoy stat names, indexed by Metric.
var MetricNames = [metricCount]string{
	MetricAdmitted:             "tokentriage.admitted",
	MetricRefusedBudget:        "tokentriage.refused.budget_usd",
	MetricRefusedQuotaTokens:   "tokentriage.refused.quota_tokens",
	MetricRefusedQuotaRequests: "tokentriage.refused.quota_requests",
	MetricRefusedRPM:           "tokentriage.refused.rpm",
	MetricRefusedTPM:           "tokentriage.refused.tpm",
	MetricRefusedConcurrency:   "tokentriage.refused.concurrency",
	MetricRejected:             "tokentriage.rejected",
	MetricShadowRefused:        "tokentriage.shadow_refused",
	MetricSoftBreach:           "tokentriage.soft_breach",
	MetricSuspended:            "tokentriage.suspended",
	MetricCASRetries:           "tokentriage.cas_retries",
	MetricRowsSent:             "tokentriage.ledger.rows_sent",
	MetricRowsDropped:          "tokentriage.ledger.rows_dropped",
	MetricSyncOK:               "tokentriage.sync.ok",
	MetricSyncFailed:           "tokentriage.sync.failed",
	MetricPlanMismatch:         "tokentriage.sync.plan_mismatch",
	MetricThresholdAlerts:      "tokentriage.threshold_alerts",
	MetricServedOutOfScope:     "tokentriage.served_out_of_scope",
	MetricUsageClamped:         "tokentriage.usage_clamped",
	MetricPassthrough:          "tokentriage.passthrough",
	MetricEndpointVariant:      "tokentriage.endpoint_variant",
	// Rows folded into overflow totals while the queue was full; they
	// reach the accountant as summary rows.
	MetricRowsFolded: "tokentriage.ledger.rows_folded",
	// Unauthenticated refusals past the sampling rate, summed rather
	// than written one row each.
	MetricRefusalsSummed: "tokentriage.ledger.refusals_summed",
	// Rows the accountant refused alone, whole, twice: logged and dropped.
	MetricRowsQuarantined: "tokentriage.ledger.rows_quarantined",
	// Rows with a member past a row's bounds, cut (ledger.Row.Bound).
	MetricRowsCut: "tokentriage.ledger.rows_cut",
	// Start rows of calls in flight sent to the accountant.
	MetricStartsSent: "tokentriage.ledger.starts_sent",
	MetricOverflow:   "tokentriage.overflow",
	// Requests served with a limit's fallback model instead of refused.
	MetricFallback: "tokentriage.fallback",
}
