package devserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/shared/vkey"
	"github.com/tokentriage/tokentriage/wasmtest"
)

// MePath is the path the filter answers itself with the caller's identity
// and limits.
const MePath = "/tt/v1/me"

// pollEvery is how often readiness is polled. Every poll of /tt/v1/me that
// the filter refuses (no plan yet, a key not synced yet) is a ledger row,
// so it is not polled hard.
const pollEvery = 100 * time.Millisecond

// waitArmed waits until the filter has a plan: /tt/v1/me answers anything
// but the 503 of a filter still waiting for its first sync (RATIONALE.md,
// "Why does `tokentriage dev` poll /tt/v1/me before it prints?").
func (s *Server) waitArmed(ctx context.Context) error {
	return s.pollMe(ctx, "", func(status int) bool { return status != http.StatusServiceUnavailable },
		fmt.Sprintf("the filter has no plan yet (its first sync with the accountant at %s has not succeeded)", s.acctURL))
}

// MintKey mints a virtual key for owner through the management API and
// returns it once the gateway knows it (the filters sync keys every
// second), so a request with it is served at once.
func (s *Server) MintKey(ctx context.Context, owner string, scopes vkey.Scopes) (api.MintedKey, error) {
	k, err := s.Admin().MintKey(ctx, owner, scopes)
	if err != nil {
		return k, fmt.Errorf("devserver: minting a key for %s: %w", owner, err)
	}
	return k, s.WaitKey(ctx, k.Key)
}

// WaitKey waits until the gateway's filter knows key: /tt/v1/me with it
// answers 200. It gives up after ArmTimeout or when ctx ends.
func (s *Server) WaitKey(ctx context.Context, key string) error {
	return s.pollMe(ctx, key, func(status int) bool { return status == http.StatusOK }, "the gateway does not know the key yet")
}

// pollMe asks /tt/v1/me with key (none if "") until done holds for its
// status, for at most ArmTimeout. Past that, or when ctx ends, its error
// says what is not yet so (notYet), with the last answer and the filter's
// errors.
func (s *Server) pollMe(ctx context.Context, key string, done func(status int) bool, notYet string) error {
	ctx, cancel := context.WithTimeout(ctx, ArmTimeout)
	defer cancel()
	var last string
	for {
		status, body, err := s.me(ctx, key)
		switch {
		case err == nil && done(status):
			return nil
		case err != nil:
			last = err.Error()
		default:
			last = fmt.Sprintf("%d %s", status, strings.TrimSpace(body))
		}
		if err := s.sleep(ctx); err != nil {
			return fmt.Errorf("devserver: %s: %w; last answer of %s: %s%s", notYet, err, MePath, last, s.filterErrors())
		}
	}
}

// me asks the gateway's /tt/v1/me, with key when it is not empty.
func (s *Server) me(ctx context.Context, key string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.gwURL+MePath, nil)
	if err != nil {
		return 0, "", err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("User-Agent", probeAgent) // the request log leaves these out
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), err
}

// probeAgent is the User-Agent of dev's own readiness polls of MePath.
const probeAgent = "tokentriage-dev-readiness"

func (s *Server) sleep(ctx context.Context) error {
	t := time.NewTimer(pollEvery)
	defer t.Stop()
	select {
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return errors.New("timed out")
		}
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// filterErrors is the filter's last warnings and errors, for an error
// message.
func (s *Server) filterErrors() string {
	var lines []string
	for _, l := range s.host.Logs() {
		if l.Level >= wasmtest.LogWarn {
			lines = append(lines, l.Message)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return "; the filter logged: " + strings.Join(lines, " | ")
}

// untilArmed answers every request but the readiness probe (/tt/v1/me) with
// a 503 until the filter has its first plan. Before that the filter would
// admit everything unchecked (DESIGN.md: it admits and discloses until the
// first plan arrives), which suits a gateway Envoy cannot hold back but not
// one that can simply wait: dev opens its port early only so that a busy
// port is reported at once.
func (s *Server) untilArmed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.armed.Load() || r.URL.Path == MePath {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.Header().Set("X-Should-Retry", "true") // the SDKs retry it within their backoff
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"type":"limit_unavailable","message":"tokentriage dev is starting: the filter has not synced its plan from the accountant yet; retry in a moment"}}`+"\n")
	})
}
