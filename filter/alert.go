package filter

import (
	"encoding/binary"
	"github.com/tokentriage/tokentriage/shared/jsontok"
	"strconv"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// Threshold alerts for the limits counted at the gate (rpm, tpm,
// concurrency). Their counters live in the gateway, so the gateway raises
// them; the accountant raises those of the LedgerSettled types from the
// counters it folds. An alert is raised when an admission carries an
// instance from below a posture.thresholds fraction of its amount to at or
// above it, at most once per window (per minute for concurrency) across
// the VMs: a shared-data record per instance and threshold holds when it
// was last raised, and the VM whose set lands raises it.

// alertKey is the shared-data record of one instance and threshold.
func alertKey(id string, th float64) string {
	return "tt/alert|" + id + "|" + strconv.FormatFloat(th, 'g', -1, 64)
}

// gateAlerts raises the alerts an admission of in moved it through: its
// count went from before to after of amount.
func (e *Engine) gateAlerts(in *govern.Instance, before, after, amount int64, now time.Time) {
	l := in.Limit
	for _, th := range l.Thresholds {
		if govern.Crossed(before, after, amount, th) {
			e.raiseGateAlert(in, th, after, amount, now)
		}
	}
}

func (e *Engine) raiseGateAlert(in *govern.Instance, th float64, value, amount int64, now time.Time) {
	l := in.Limit
	every := l.Period.Window
	if every <= 0 {
		every = time.Minute
	}
	key := alertKey(in.CellKey(), th)
	v, cas, found, err := e.cells.store.Get(key)
	if err != nil {
		return
	}
	if found && len(v) == 8 && now.UnixNano()-int64(binary.LittleEndian.Uint64(v)) < int64(every) {
		return // raised within this window already
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(now.UnixNano()))
	if swapped, err := e.cells.setNew(key, b[:], cas, found); err != nil || !swapped {
		return // another VM raised it
	}
	e.host.Metrics.Add(MetricThresholdAlerts, 1)
	e.logf(LogWarn, "threshold alert: limit %s (%s) on %s reached %s of its amount: %d of %d",
		l.ID, l.Type, in.Node, strconv.FormatFloat(th, 'g', -1, 64), value, amount)
	e.queueAlert(in, th, value, amount, now)
}

// maxQueuedAlerts bounds the alerts a VM holds for the accountant between
// two ticks; past it they are only logged.
const maxQueuedAlerts = 64

// queueAlert adds the alert, as a syncwire.GateAlert JSON line, to what
// the next tick sends to the accountant, which logs, counts and posts it
// to its alert webhook with its own.
func (e *Engine) queueAlert(in *govern.Instance, th float64, value, amount int64, now time.Time) {
	if e.host.Caller == nil || e.alertCount >= maxQueuedAlerts {
		return
	}
	l := in.Limit
	b := append(e.alerts, `{"limit_id":`...)
	b = jsontok.AppendString(b, l.ID)
	b = append(b, `,"limit_type":`...)
	b = jsontok.AppendString(b, l.Type.String())
	b = append(b, `,"node":`...)
	b = jsontok.AppendString(b, in.Node)
	b = append(b, `,"counter":`...)
	b = jsontok.AppendString(b, in.ID)
	b = append(b, `,"threshold":`...)
	b = strconv.AppendFloat(b, th, 'g', -1, 64)
	b = append(b, `,"window":`...)
	window := ""
	if l.Period.Window > 0 {
		window = l.Period.Window.String()
	}
	b = jsontok.AppendString(b, window)
	b = append(b, `,"observed":`...)
	b = strconv.AppendInt(b, value, 10)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, amount, 10)
	b = append(b, `,"at":"`...)
	b = now.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, "\"}\n"...)
	e.alerts, e.alertCount = b, e.alertCount+1
}

// sendAlerts sends the queued alerts from the tick. They are not resent:
// an alert the accountant did not take stays in the gateway's log.
func (e *Engine) sendAlerts() {
	if len(e.alerts) == 0 || e.host.Caller == nil {
		return
	}
	n := e.alertCount
	err := e.host.Caller.Call("POST", syncwire.AlertsPath, e.ingestHeaders, e.alerts, ingestTimout, func(status int, _ []byte) {
		if status != 200 {
			e.logf(LogWarn, "sending %d threshold alerts to the accountant failed (status %d%s); they are in this log", n, status, refusedToken(status))
		}
	})
	if err != nil {
		e.logf(LogWarn, "sending threshold alerts to the accountant: %v", err)
	}
	e.alerts, e.alertCount = e.alerts[:0], 0
}
