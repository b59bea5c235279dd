package redisstore

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
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
