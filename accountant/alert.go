package accountant

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tokentriage/tokentriage/accountant/core"
	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// AlertEvent is the JSON body POSTed to the alert webhook, one per
// threshold crossing. Amounts of budget_usd limits are dollars (exact
// decimals); other types are counts.
type AlertEvent struct {
	Event       string          `json:"event"` // "threshold_crossed"
	LimitID     string          `json:"limit_id"`
	LimitType   string          `json:"limit_type"`
	Unit        string          `json:"unit"`
	Node        string          `json:"node"`
	Counter     string          `json:"counter"` // counter identity
	Threshold   float64         `json:"threshold"`
	Period      string          `json:"period"`
	PeriodStart time.Time       `json:"period_start"`
	ResetsAt    time.Time       `json:"resets_at"`
	Observed    json.RawMessage `json:"observed"`
	Limit       json.RawMessage `json:"limit"`
	At          time.Time       `json:"at"`
}

// NewAlertEvent renders a core alert for the wire.
func NewAlertEvent(a core.Alert) AlertEvent {
	resets := a.PeriodEnd
	if resets.IsZero() {
		resets = calendar.End(a.Unit, a.PeriodStart)
	}
	return AlertEvent{
		Event: "threshold_crossed", LimitID: a.LimitID, LimitType: a.Type.String(), Unit: a.Type.Unit(),
		Node: a.Node, Counter: a.ID, Threshold: a.Threshold, Period: unitName(a.Unit),
		PeriodStart: a.PeriodStart, ResetsAt: resets,
		Observed: amount(a.Type, a.Value), Limit: amount(a.Type, a.Amount), At: a.At.UTC(),
	}
}

func amount(t govern.Type, v int64) json.RawMessage {
	if t == govern.BudgetUSD {
		return json.RawMessage(config.USD{Nanos: v}.String())
	}
	b, _ := json.Marshal(v)
	return b
}

func unitName(u calendar.Unit) string { return govern.CalendarName(u) }

// alerter logs each alert, counts it, and posts it to the webhook, in
// the webhook's format, from a bounded queue (a slow webhook never slows
// ingest; overflow is logged).
type alerter struct {
	url     string
	format  string // AlertJSON, AlertSlack or AlertTeams
	link    string // the dashboard's address, for a chat's link; "" none
	log     *slog.Logger
	metrics *metrics
	queue   chan outbound
	client  *http.Client
	wg      sync.WaitGroup
	mu      sync.Mutex // guards closed and sends on queue
	closed  bool
	// ctx ends AlertDrain after close starts: the posts left are given up.
	ctx     context.Context
	cancel  context.CancelFunc
	drainIn time.Duration // AlertDrain; tests shorten it
}

// outbound is one post queued for the webhook: its body and what it is
// about, for the log.
type outbound struct {
	body []byte
	what string
}

// AlertDrain bounds how long stopping the accountant waits for the webhook
// to take the alerts still queued; the rest are logged as not posted.
const AlertDrain = 10 * time.Second

func newAlerter(url, format, link string, log *slog.Logger, m *metrics) *alerter {
	if format == "" {
		format = AlertJSON
	}
	a := &alerter{url: url, format: format, link: link, log: log, metrics: m, client: &http.Client{Timeout: 5 * time.Second}, drainIn: AlertDrain}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	if url != "" {
		a.queue = make(chan outbound, 1024)
		a.wg.Add(1)
		go a.post()
	}
	return a
}

func (a *alerter) emit(alerts []core.Alert) {
	for _, al := range alerts {
		a.emitEvent(NewAlertEvent(al))
	}
}

// emitEvent logs, counts and queues one alert for the webhook.
func (a *alerter) emitEvent(ev AlertEvent) {
	a.metrics.alerts.WithLabelValues(ev.LimitID).Inc()
	a.log.Warn("threshold alert: limit "+ev.LimitID+" at "+ev.Node+" crossed its threshold",
		"limit_id", ev.LimitID, "limit_type", ev.LimitType, "node", ev.Node, "threshold", ev.Threshold,
		"period", ev.Period, "period_start", ev.PeriodStart, "observed", string(ev.Observed), "limit", string(ev.Limit))
	if a.queue == nil {
		return
	}
	body, err := render(a.format, ev, alertMessage(ev, a.link))
	if err != nil {
		a.log.Error("alert webhook: rendering the alert", "limit_id", ev.LimitID, "err", err)
		return
	}
	a.mu.Lock()
	if !a.closed {
		select {
		case a.queue <- outbound{body: body, what: "limit_id " + ev.LimitID}:
		default:
			a.log.Error("alert webhook queue full; alert not posted", "limit_id", ev.LimitID, "node", ev.Node)
		}
	}
	a.mu.Unlock()
}

// GateAlertEvent renders an alert a filter raised for a limit it counts at
// the gate (rpm, tpm, concurrency). Its period is the rate window (empty
// for concurrency), starting at the alert's window start.
func GateAlertEvent(g syncwire.GateAlert) (AlertEvent, error) {
	t, ok := govern.ParseType(g.LimitType)
	if !ok || t.Class() == govern.LedgerSettled {
		return AlertEvent{}, fmt.Errorf("limit_type %q is not one the gateway counts (rpm, tpm, concurrency)", g.LimitType)
	}
	if g.LimitID == "" || g.Counter == "" {
		return AlertEvent{}, errors.New("limit_id and counter are required")
	}
	if g.At.IsZero() {
		return AlertEvent{}, errors.New("at is required")
	}
	at := g.At.UTC()
	ev := AlertEvent{Event: "threshold_crossed", LimitID: g.LimitID, LimitType: t.String(), Unit: t.Unit(),
		Node: g.Node, Counter: g.Counter, Threshold: g.Threshold, Period: g.Window,
		PeriodStart: at, ResetsAt: at, At: at,
		Observed: json.RawMessage(strconv.FormatInt(g.Observed, 10)), Limit: json.RawMessage(strconv.FormatInt(g.Limit, 10))}
	if g.Window != "" {
		w, err := time.ParseDuration(g.Window)
		if err != nil || w <= 0 {
			return AlertEvent{}, fmt.Errorf("window %q is not a duration", g.Window)
		}
		ev.PeriodStart = at.Truncate(w)
		ev.ResetsAt = ev.PeriodStart.Add(w)
	}
	return ev, nil
}

func (a *alerter) post() {
	defer a.wg.Done()
	given := 0
	defer func() {
		if given > 0 {
			a.log.Error("alerts not posted: the webhook did not take them before the accountant stopped", "url", a.url, "alerts", given)
		}
	}()
	for o := range a.queue {
		if a.ctx.Err() != nil {
			given++
			continue
		}
		if err := a.send(a.ctx, o.body); err != nil {
			a.log.Error("alert webhook: "+err.Error(), "url", a.url, "about", o.what)
		}
	}
}

// send posts body to the webhook and reports whether it took it (a 2xx).
func (a *alerter) send(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("failed: %w", err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}

// close drains the webhook queue, for at most AlertDrain.
func (a *alerter) close() {
	a.mu.Lock()
	if a.closed || a.queue == nil {
		a.closed = true
		a.mu.Unlock()
		a.cancel()
		return
	}
	a.closed = true
	close(a.queue)
	a.mu.Unlock()
	t := time.AfterFunc(a.drainIn, a.cancel)
	a.wg.Wait()
	t.Stop()
	a.cancel()
}
