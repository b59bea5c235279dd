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
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// A mirror (Options.Control) keeps a copy of the owner's runtime plane in
// its own governance.db and serves it (sync, key checks, the management
// API's reads) whether or not the owner answers. It pulls in a loop, a long
// poll that the owner answers when its plane moves; while the owner is
// unreachable the mirror keeps its last copy, says so in
// tt_accountant_control_reachable, a log line and /healthz, and retries.
// Management writes it forwards to the owner (see forward).

// Timings of the mirror's pulls.
const (
	// PullWait is how long a current pull waits at the owner for a change.
	PullWait = MaxPlaneWait
	// FirstPullTimeout bounds the pull New makes before the accountant
	// serves, so a mirror starts with the owner's plane when it can.
	FirstPullTimeout = 10 * time.Second
	// pullRetry and maxPullRetry space the pulls while the owner does not
	// answer.
	pullRetry    = 500 * time.Millisecond
	maxPullRetry = 2 * time.Second
	// forwardTimeout bounds a management write forwarded to the owner.
	forwardTimeout = 30 * time.Second
	// maxPendingReloads bounds the reloads kept for an owner that does not
	// answer; past it the oldest is dropped (it stays in this log).
	maxPendingReloads = 256
)

// ForwardedByHeader marks a management write a mirror forwarded, so a
// mirror that receives one (its --control names another mirror) refuses it
// instead of forwarding it in a loop.
const ForwardedByHeader = "X-Tt-Forwarded-By"

// ForwardedToHeader names the owner on the answer to a forwarded write.
const ForwardedToHeader = "X-Tt-Forwarded-To"

type mirror struct {
	s      *Server
	owner  string // the owner's base URL, no trailing slash
	name   string // this accountant, as the owner lists it
	tokens []string
	client *http.Client
	log    *slog.Logger

	kick chan struct{} // restarts a waiting pull (the report changed)

	applyMu sync.Mutex // one copy applied at a time

	mu        sync.Mutex
	lastOK    time.Time // the last pull the owner answered
	version   string    // the plane version held
	fleet     rolloutReport
	awaySince time.Time // zero while the owner answers
	awayErr   string
	token     int // the index into tokens that the owner took last
	// reloads are this accountant's config reloads the owner has not
	// taken into its audit log yet (at most maxPendingReloads).
	reloads []mirrorReload
	sending bool

	reachable prometheus.Gauge
	failures  prometheus.Counter
}

// controlURL checks the --control URL: an http(s) base URL.
func controlURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("accountant: --control %q is not the owner accountant's base URL, like http://10.0.0.5:8791", raw)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

func newMirror(s *Server, owner string) *mirror {
	host, _ := os.Hostname()
	m := &mirror{
		s: s, owner: owner, name: host + "/" + s.opts.Listen,
		client: &http.Client{},
		log:    s.log.With("owner", owner),
		kick:   make(chan struct{}, 1),
	}
	m.tokens = []string{s.opts.InternalToken}
	if s.opts.AdminToken != "" {
		m.tokens = append(m.tokens, s.opts.AdminToken)
	}
	m.reachable = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "tt", Subsystem: "accountant", Name: "control_reachable",
		Help: "1 while the owner of the runtime plane (--control) answers this mirror's pulls, 0 while the mirror serves its last copy."})
	m.failures = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "tt", Subsystem: "accountant", Name: "control_pull_failures_total",
		Help: "Pulls of the runtime plane the owner did not answer."})
	s.metrics.reg.MustRegister(m.reachable, m.failures,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "tt", Subsystem: "accountant", Name: "control_copy_age_seconds",
			Help: "Time since the owner of the runtime plane last answered a pull (how old the mirrored copy may be)."}, func() float64 {
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.lastOK.IsZero() {
				return 0
			}
			return s.now().Sub(m.lastOK).Seconds()
		}))
	return m
}

// run pulls until ctx ends.
func (m *mirror) run(ctx context.Context) {
	retry := pullRetry
	for ctx.Err() == nil {
		// A mirror that has not heard from the owner asks without waiting,
		// so it knows the owner is back at its first answer.
		wait := PullWait
		m.mu.Lock()
		if !m.awaySince.IsZero() || m.lastOK.IsZero() {
			wait = 0
		}
		m.mu.Unlock()
		_, err := m.pull(ctx, wait)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			retry = pullRetry
		case errors.Is(err, errKicked):
			continue
		default:
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
			case <-m.kick:
			}
			retry = min(retry*2, maxPullRetry)
		}
	}
}

var errKicked = errors.New("pull restarted")

// kickPull restarts a pull that waits at the owner, so a changed report
// reaches it now. It never blocks.
func (m *mirror) kickPull() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// pull asks the owner once, waiting up to wait for a change, applies the
// copy it brings, and reports whether more of it waits (an audit log sent
// in pages).
func (m *mirror) pull(ctx context.Context, wait time.Duration) (more bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kicked := make(chan struct{})
	stop := make(chan struct{})
	defer close(stop)
	if wait > 0 {
		// Drain a stale kick: the report below is current.
		select {
		case <-m.kick:
		default:
		}
		go func() {
			select {
			case <-m.kick:
				close(kicked)
				cancel()
			case <-stop:
			}
		}()
	}
	have, err := m.s.db.PlaneVersion()
	if err != nil {
		return false, err
	}
	haveFeed, err := m.s.db.FeedCursor()
	if err != nil {
		return false, err
	}
	m.mu.Lock()
	seen := m.fleet.hash()
	m.mu.Unlock()
	body, _ := json.Marshal(planePull{Mirror: m.name, Accountant: m.s.advertise, Have: have, HaveFeed: haveFeed, WaitMS: wait.Milliseconds(), Rollout: m.s.localReport(), Seen: seen})
	ans, err := m.ask(ctx, body, wait)
	if err != nil {
		select {
		case <-kicked:
			return false, errKicked
		default:
		}
		m.away(err)
		return false, err
	}
	if ans.Plane != nil {
		if err := m.apply(*ans.Plane); err != nil {
			m.away(err)
			return false, err
		}
		more = ans.Plane.More
	}
	m.answered(ans)
	return more, nil
}

// ask sends one pull, trying the internal token, then the admin token
// when the owner refuses the first (a fleet whose accountants share the
// admin token but not the internal one).
func (m *mirror) ask(ctx context.Context, body []byte, wait time.Duration) (planeAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, wait+10*time.Second)
	defer cancel()
	m.mu.Lock()
	first := m.token
	m.mu.Unlock()
	var refused []string
	for i := range m.tokens {
		ti := (first + i) % len(m.tokens)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.owner+PlanePath, bytes.NewReader(body))
		if err != nil {
			return planeAnswer{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+m.tokens[ti])
		resp, err := m.client.Do(req)
		if err != nil {
			return planeAnswer{}, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return planeAnswer{}, err
		}
		if resp.StatusCode == http.StatusUnauthorized {
			refused = append(refused, errorMessage(b))
			continue
		}
		if resp.StatusCode != http.StatusOK {
			return planeAnswer{}, fmt.Errorf("the owner answered %d: %s", resp.StatusCode, errorMessage(b))
		}
		var ans planeAnswer
		if err := json.Unmarshal(b, &ans); err != nil {
			return planeAnswer{}, fmt.Errorf("the owner's answer is not a plane: %w", err)
		}
		m.mu.Lock()
		m.token = ti
		m.mu.Unlock()
		return ans, nil
	}
	return planeAnswer{}, fmt.Errorf("the owner refused this accountant's tokens (%s): give every accountant of the fleet the same %s (or the same TT_ADMIN_TOKEN)",
		strings.Join(refused, "; "), InternalTokenEnv)
}

// errorMessage is the message of an error answer, or the body itself.
func errorMessage(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return strings.TrimSpace(string(b))
}

// apply stores a copy and re-arms with it.
func (m *mirror) apply(p runtime.Plane) error {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	have, err := m.s.db.PlaneVersion()
	if err != nil {
		return err
	}
	if id, seq, ok := runtime.VersionSeq(have); ok && id == p.ID && seq >= p.Seq {
		return nil // a pull that crossed another one, which applied this copy or a newer
	}
	if err := m.s.db.ApplyPlane(p); err != nil {
		return fmt.Errorf("applying the owner's plane: %w", err)
	}
	m.s.Changed()
	m.log.Info("runtime plane: applied the owner's copy", "version", p.Version(), "previous", have)
	return nil
}

// answered records a pull the owner answered.
func (m *mirror) answered(ans planeAnswer) {
	now := m.s.now()
	m.mu.Lock()
	away, since := !m.awaySince.IsZero(), m.awaySince
	m.lastOK, m.version, m.fleet = now, ans.Version, ans.Rollout
	if ans.Accountants != nil {
		m.s.members.replace(ans.Accountants)
	}
	m.awaySince, m.awayErr = time.Time{}, ""
	m.mu.Unlock()
	m.reachable.Set(1)
	go m.sendReloads()
	if away {
		m.log.Info("runtime plane: the owner answers again; mirroring it", "version", ans.Version, "away_for", now.Sub(since).Round(time.Second).String())
	}
}

// away records a pull the owner did not answer: the first of a run is
// logged, the rest counted.
func (m *mirror) away(err error) {
	now := m.s.now()
	m.failures.Inc()
	m.reachable.Set(0)
	m.mu.Lock()
	first := m.awaySince.IsZero()
	if first {
		m.awaySince = now
	}
	// Said at the first failure and again when the reason changes (an owner
	// that was not listening yet, then answers with a refusal), not once
	// per retry.
	changed := m.awayErr != err.Error()
	m.awayErr = err.Error()
	version := m.version
	m.mu.Unlock()
	if first || changed {
		m.log.Warn("runtime plane: no copy from the owner; serving the last copy until one arrives", "err", err.Error(), "version", version)
	}
}

// recordReload queues this accountant's config reload for the owner's
// audit log and sends the queue.
func (m *mirror) recordReload(rec mirrorReload) {
	rec.Mirror = m.name
	m.mu.Lock()
	if len(m.reloads) >= maxPendingReloads {
		m.log.Warn("runtime plane: the owner has not taken this accountant's config reloads; dropping the oldest from the queue (it is in this log)", "queued", len(m.reloads))
		m.reloads = m.reloads[1:]
	}
	m.reloads = append(m.reloads, rec)
	m.mu.Unlock()
	go m.sendReloads()
}

// sendReloads sends the queued reloads to the owner, oldest first, until
// one fails (the next answered pull sends the rest).
func (m *mirror) sendReloads() {
	m.mu.Lock()
	if m.sending || len(m.reloads) == 0 {
		m.mu.Unlock()
		return
	}
	m.sending = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.sending = false
		m.mu.Unlock()
	}()
	for {
		m.mu.Lock()
		if len(m.reloads) == 0 {
			m.mu.Unlock()
			return
		}
		rec, ti := m.reloads[0], m.token
		m.mu.Unlock()
		body, _ := json.Marshal(rec)
		ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.owner+PlaneReloadPath, bytes.NewReader(body))
		if err != nil {
			cancel()
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+m.tokens[ti])
		resp, err := m.client.Do(req)
		cancel()
		if err != nil {
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			m.log.Warn("runtime plane: the owner did not take this accountant's config reload into its audit log; retrying after its next answer", "status", resp.StatusCode)
			return
		}
		m.mu.Lock()
		if len(m.reloads) > 0 && m.reloads[0].At.Equal(rec.At) && m.reloads[0].Who == rec.Who {
			m.reloads = m.reloads[1:]
		}
		m.mu.Unlock()
	}
}

// fleetRollout is the fleet's rollout from the owner's last answer, while
// that answer is recent (within LivenessWindow).
func (m *mirror) fleetRollout(now time.Time) (api.Rollout, bool) {
	m.mu.Lock()
	fleet, at := m.fleet, m.lastOK
	m.mu.Unlock()
	if at.IsZero() || now.Sub(at) > LivenessWindow {
		return api.Rollout{}, false
	}
	held := make(map[heldKey]int, len(fleet.Holding))
	for _, h := range fleet.Holding {
		held[heldKey{h.LimitID, h.Node, h.Amount}] = h.Replicas
	}
	return api.Rollout{
		Live:    fleet.Live,
		Window:  LivenessWindow,
		Holding: func(o govern.Override) int { return held[heldKey{o.LimitID, o.Node, o.Amount}] },
	}, true
}

// status is the mirror's line in /healthz.
func (m *mirror) status(now time.Time) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.lastOK.IsZero() && m.awaySince.IsZero():
		return fmt.Sprintf("runtime plane: mirror of %s; no pull answered yet", m.owner)
	case m.awaySince.IsZero():
		return fmt.Sprintf("runtime plane: mirror of %s; version %s, answered %s ago", m.owner, m.version, now.Sub(m.lastOK).Round(time.Second))
	case m.lastOK.IsZero():
		return fmt.Sprintf("runtime plane: mirror of %s; the owner has not answered since %s (%s); serving the copy in governance.db", m.owner, m.awaySince.UTC().Format(time.RFC3339), m.awayErr)
	}
	return fmt.Sprintf("runtime plane: mirror of %s; the owner has not answered since %s (%s); serving the last copy, version %s from %s",
		m.owner, m.awaySince.UTC().Format(time.RFC3339), m.awayErr, m.version, m.lastOK.UTC().Format(time.RFC3339))
}

// forward sends a management write to the owner and relays its answer.
// After a write the owner took, the mirror pulls at once, so the write is
// in its own copy when the caller reads it back here. An owner that does
// not answer is a 503 naming it.
func (m *mirror) forward(w http.ResponseWriter, r *http.Request) {
	if by := r.Header.Get(ForwardedByHeader); by != "" {
		writeAPIError(w, http.StatusLoopDetected, "forward_loop", fmt.Sprintf(
			"this accountant mirrors the runtime plane of %s and got a write another mirror (%s) forwarded: every --control must name the owner, the accountant started without --control", m.owner, by))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		writeAPIError(w, http.StatusRequestEntityTooLarge, "invalid_request", "the request body is larger than 1 MiB")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), forwardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, m.owner+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		writeAPIError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	for _, h := range []string{"Authorization", "Content-Type", "Accept"} {
		for _, v := range r.Header.Values(h) {
			req.Header.Add(h, v)
		}
	}
	req.Header.Set(ForwardedByHeader, m.name)
	resp, err := m.client.Do(req)
	if err != nil {
		writeAPIError(w, http.StatusServiceUnavailable, "owner_unreachable", fmt.Sprintf(
			"this accountant mirrors the runtime plane of %s, where keys, nodes, overrides and admins are written, and the owner did not answer (%v); retry when it is back, or send the write to %s directly (reads are served here from the last copy)",
			m.owner, err, m.owner))
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		writeAPIError(w, http.StatusBadGateway, "owner_unreachable", fmt.Sprintf("the owner %s broke off its answer to the forwarded write: %v; read the write back before retrying it", m.owner, err))
		return
	}
	if resp.StatusCode/100 == 2 {
		m.refresh(r.Context())
	}
	for _, h := range []string{"Content-Type", "Cache-Control", "Allow"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.Header().Set(ForwardedToHeader, m.owner)
	w.WriteHeader(resp.StatusCode)
	w.Write(answer)
}

// refresh pulls now, without waiting at the owner, and applies the copy
// (every page of it).
func (m *mirror) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	for range 100 {
		more, err := m.pull(ctx, 0)
		if err != nil || !more {
			break
		}
	}
	m.kickPull() // the waiting pull reports what this one held
}

// writeAPIError answers in the management API's error shape.
func writeAPIError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Type: typ, Message: msg}})
}

// forwardWrites is the management API behind a mirror: reads are served
// from the copy, writes go to the owner, except a config reload, which is
// this accountant's own.
func (s *Server) forwardWrites(h http.Handler) http.Handler {
	if s.mirror == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet || r.Method == http.MethodHead,
			r.URL.Path == api.Prefix+"reload":
			h.ServeHTTP(w, r)
		default:
			s.mirror.forward(w, r)
		}
	})
}
