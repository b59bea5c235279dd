package redisstore

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/redistest"
)

// records keeps every log record, at every level.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) find(level slog.Level, part string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.recs {
		if rec.Level == level && strings.Contains(rec.Message, part) {
			n++
		}
	}
	return n
}

// A Redis that does not answer from the start is logged once, in the
// accountant's log, at warning level; go-redis's own lines about each
// failed dial (several a second while it is away) go to the same logger at
// debug level instead of to stderr in a format of their own.
func TestUnreachableRedisIsLoggedOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every dial is refused

	recs := &records{}
	c, err := New(Options{Addr: addr, Logger: slog.New(recs)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The first probe's PING fails after its pool logged the failed dial.
	for why, _ := c.Down(); !strings.Contains(why, "connection refused"); why, _ = c.Down() {
		time.Sleep(10 * time.Millisecond)
	}
	if recs.find(slog.LevelDebug, "failed to dial") == 0 {
		t.Fatal("go-redis's line about the failed dial did not reach the accountant's logger")
	}
	// Three probes later, still one warning.
	for recs.find(slog.LevelDebug, "failed to dial") < 3 {
		time.Sleep(10 * time.Millisecond)
	}
	if n := recs.find(slog.LevelWarn, "redis: not reachable"); n != 1 {
		t.Errorf("%d warnings that Redis is not reachable after three failed probes; want 1", n)
	}
}

// lateContext is a context whose deadline has passed and whose timer has
// not yet run: Err is still nil, as a busy machine leaves it for a moment.
type lateContext struct {
	context.Context
	deadline time.Time
}

func (c lateContext) Deadline() (time.Time, bool) { return c.deadline, true }

// TestDeadlineIsNotRedisLost: an operation whose connection deadline fired
// before its context's timer ran ("i/o timeout" while ctx.Err() is nil)
// missed its deadline; it fails alone with ErrTimeout and leaves Redis up,
// instead of marking it lost and sending every Redis-backed limit to its
// local answer. A network error before the deadline is still Redis lost.
func TestDeadlineIsNotRedisLost(t *testing.T) {
	r := redistest.Start(t)
	c := testClient(t, r)
	ioTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	late := lateContext{Context: context.Background(), deadline: time.Now().Add(-time.Millisecond)}
	err := c.do(late, "rate_take", time.Hour, func(context.Context) error { return ioTimeout })
	if !errors.Is(err, ErrTimeout) || !c.Up() {
		why, _ := c.Down()
		t.Fatalf("an i/o timeout past the deadline: %v, up %v (%s); want ErrTimeout with Redis up", err, c.Up(), why)
	}
	err = c.do(context.Background(), "rate_take", time.Hour, func(context.Context) error {
		return &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	})
	if errors.Is(err, ErrTimeout) || c.Up() {
		t.Fatalf("a reset connection before the deadline: %v, up %v; want Redis marked down", err, c.Up())
	}
}

// TestScriptsLoadedWhenUp: once the client says Redis is up, every script
// is in Redis's script cache, so no request pays the NOSCRIPT round trip;
// so again after Redis restarts empty.
func TestScriptsLoadedWhenUp(t *testing.T) {
	r := redistest.Start(t)
	c := testClient(t, r)
	check := func(when string) {
		t.Helper()
		for _, sc := range scripts {
			if got, err := r.Do("SCRIPT", "EXISTS", sc.Hash()); err != nil || got != "1" {
				t.Errorf("%s: script %s in the cache: %q %v, want 1", when, sc.Hash(), got, err)
			}
		}
	}
	check("first up")
	// Redis lost, then back empty: the client, down meanwhile, loads the
	// scripts again before it says up.
	r.Kill()
	for c.Up() {
		c.do(context.Background(), "test_ping", time.Second, func(ctx context.Context) error { return c.rdb.Ping(ctx).Err() })
		time.Sleep(10 * time.Millisecond)
	}
	r.Restart(t, redistest.Empty)
	waitUp(t, c)
	check("up after a restart")
}

// testNoon is noon tomorrow (UTC): a fixed instant for a test's clock that
// is never in Redis's past, where the expiries the store sets from it
// (period ends, lease ends) would drop the keys as soon as they are set.
func testNoon() time.Time {
	return time.Now().UTC().Truncate(24 * time.Hour).Add(36 * time.Hour)
}
