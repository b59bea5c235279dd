package ledgerlog

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func readLines(t *testing.T, dir string) []string {
	t.Helper()
	files, err := Files(dir, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		if err := ScanFile(f, func(l []byte) error { out = append(out, string(l)); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestGroupCommitAcknowledgesOnlyDurable(t *testing.T) {
	dir := t.TempDir()
	var syncs, batches int
	var mu sync.Mutex
	l, err := Open(dir, Options{Logger: quiet(), OnSync: func(_ time.Duration, _, b int) {
		mu.Lock()
		syncs++
		batches += b
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				seq, err := l.Append(fmt.Appendf(nil, "w%d-%d\n", w, i))
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.Wait(context.Background(), seq); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := len(readLines(t, dir)); got != writers*each {
		t.Fatalf("lines = %d, want %d", got, writers*each)
	}
	if batches != writers*each {
		t.Errorf("batches made durable = %d, want %d", batches, writers*each)
	}
	if syncs > batches {
		t.Errorf("%d fsyncs for %d batches", syncs, batches)
	}
}

func TestCloseFlushesQueued(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := l.Append(fmt.Appendf(nil, "%d\n", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := len(readLines(t, dir)); got != 100 {
		t.Fatalf("lines after Close = %d, want 100", got)
	}
	if _, err := l.Append([]byte("x\n")); err != ErrClosed {
		t.Errorf("Append after Close: %v, want ErrClosed", err)
	}
}

// TestTornTailIsMovedAside: a torn last line is cut from the ledger and
// kept, byte for byte, in a file of its own that replay never reads.
func TestTornTailIsMovedAside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ActiveName)
	if err := os.WriteFile(path, []byte("{\"a\":1}\n{\"b\":2}\n{\"c\":"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logbuf bytes.Buffer
	l, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logbuf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	seq, _ := l.Append([]byte("{\"d\":4}\n"))
	if err := l.Wait(context.Background(), seq); err != nil {
		t.Fatal(err)
	}
	l.Close()
	got := strings.Join(readLines(t, dir), "|")
	if got != `{"a":1}|{"b":2}|{"d":4}` {
		t.Errorf("after repair: %s", got)
	}
	if !strings.Contains(logbuf.String(), "torn last line") || !strings.Contains(logbuf.String(), "bytes=5") {
		t.Errorf("warning not logged: %s", logbuf.String())
	}
	aside, _ := filepath.Glob(filepath.Join(dir, TornPrefix+"*"))
	if len(aside) != 1 {
		t.Fatalf("torn tails kept aside: %v, want one file", aside)
	}
	if b, _ := os.ReadFile(aside[0]); string(b) != `{"c":` {
		t.Errorf("%s holds %q, want the torn bytes %q", aside[0], b, `{"c":`)
	}
	if !strings.Contains(logbuf.String(), "kept_in="+aside[0]) {
		t.Errorf("the warning does not say where the bytes went: %s", logbuf.String())
	}
	// A file that is one torn line is emptied.
	dir2 := t.TempDir()
	os.WriteFile(filepath.Join(dir2, ActiveName), []byte("{\"x\""), 0o644)
	l2, err := Open(dir2, Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	l2.Close()
	if n := len(readLines(t, dir2)); n != 0 {
		t.Errorf("lines = %d, want 0", n)
	}
	if aside, _ := filepath.Glob(filepath.Join(dir2, TornPrefix+"*")); len(aside) != 1 {
		t.Errorf("torn tails kept aside: %v, want one file", aside)
	}
}

func TestRotationKeepsEveryLineInOrder(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 8, 10, 12, 0, 0, 0, time.UTC)
	n := 0
	l, err := Open(dir, Options{Logger: quiet(), MaxFileBytes: 64, Now: func() time.Time {
		n++
		return t0.Add(time.Duration(n) * time.Minute)
	}})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 40 {
		line := fmt.Sprintf("line-%02d", i)
		want = append(want, line)
		seq, _ := l.Append([]byte(line + "\n"))
		if err := l.Wait(context.Background(), seq); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	if got := strings.Join(readLines(t, dir), ","); got != strings.Join(want, ",") {
		t.Errorf("order across rotation:\n got %s\nwant %s", got, strings.Join(want, ","))
	}
	all, _ := Files(dir, time.Time{})
	if len(all) < 3 {
		t.Fatalf("expected rotated files, got %v", all)
	}
	// Files rotated more than RotationSlack before from are skipped.
	recent, _ := Files(dir, t0.Add(RotationSlack+3*time.Minute))
	if len(recent) >= len(all) || filepath.Base(recent[len(recent)-1]) != ActiveName {
		t.Errorf("Files(from) = %v of %v", recent, all)
	}
}

func TestScanLongLines(t *testing.T) {
	long := strings.Repeat("x", 3<<20)
	var got []int
	var where []string
	err := scan(strings.NewReader("a\n"+long+"\n\nbb"), func(n int, l []byte, torn bool) error {
		got = append(got, len(l))
		where = append(where, fmt.Sprint(n, torn))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint([]int{1, 3 << 20, 2}) {
		t.Errorf("line lengths %v", got)
	}
	// Line numbers count the empty line; only the last, unterminated line
	// is torn.
	if fmt.Sprint(where) != "[1 false 2 false 4 true]" {
		t.Errorf("line numbers and torn flags %v", where)
	}
}

// faultyFile is the active file with faults switched on and off by a test:
// a full disk (a write stops halfway with ENOSPC), a failing fsync, and a
// failing truncate.
type faultyFile struct {
	*os.File
	full, syncFails, truncFails atomic.Bool
}

func (f *faultyFile) Write(p []byte) (int, error) {
	if f.full.Load() {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, syscall.ENOSPC
	}
	return f.File.Write(p)
}

func (f *faultyFile) Sync() error {
	if f.syncFails.Load() {
		return syscall.EIO
	}
	return f.File.Sync()
}

func (f *faultyFile) Truncate(n int64) error {
	if f.truncFails.Load() {
		return syscall.EIO
	}
	return f.File.Truncate(n)
}

// TestFailedCommitsAreCutOutAndRecover: a commit that fails (a full disk, a
// failing fsync) fails its callers, leaves nothing of itself in the file,
// is logged once and counted; the next commit that succeeds is
// acknowledged without a restart, and the recovery is logged.
func TestFailedCommitsAreCutOutAndRecover(t *testing.T) {
	dir := t.TempDir()
	ff := &faultyFile{}
	var logbuf bytes.Buffer
	var logMu sync.Mutex
	var failures atomic.Int64
	now := time.Date(2026, 8, 10, 12, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	l, err := Open(dir, Options{
		Logger:  slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logbuf}, nil)),
		OnError: func(error, int) { failures.Add(1) },
		Now:     func() time.Time { return now.Add(time.Duration(clock.Load())) },
		open: func(path string) (file, error) {
			f, err := openAppend(path)
			if err != nil {
				return nil, err
			}
			ff.File = f.(*os.File)
			return ff, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	put := func(line string) error {
		seq, err := l.Append([]byte(line + "\n"))
		if err != nil {
			return err
		}
		return l.Wait(context.Background(), seq)
	}
	if err := put("one"); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		fault   func(bool)
		line    string
		wantErr string
	}{
		{ff.full.Store, "two", "ledgerlog: writing " + filepath.Join(dir, ActiveName) + ": no space left on device"},
		{ff.full.Store, "three", "ledgerlog: writing " + filepath.Join(dir, ActiveName) + ": no space left on device"},
		{ff.syncFails.Store, "four", "ledgerlog: syncing " + filepath.Join(dir, ActiveName) + ": input/output error"},
	}
	for i, st := range steps {
		st.fault(true)
		clock.Add(int64(time.Second))
		err := put(st.line)
		if err == nil || err.Error() != st.wantErr {
			t.Errorf("step %d: Wait = %v, want %s", i, err, st.wantErr)
		}
		if l.Err() == nil {
			t.Errorf("step %d: Err() is nil while commits fail", i)
		}
		st.fault(false)
		if got := strings.Join(readLines(t, dir), ","); got != "one" {
			t.Errorf("step %d: the file holds %q after a failed commit, want only what succeeded", i, got)
		}
	}
	if err := put("five"); err != nil {
		t.Fatalf("after the disk has room again: %v", err)
	}
	if l.Err() != nil {
		t.Errorf("Err() = %v after a commit succeeded", l.Err())
	}
	if got := strings.Join(readLines(t, dir), ","); got != "one,five" {
		t.Errorf("ledger %q, want one,five", got)
	}
	if failures.Load() != 3 {
		t.Errorf("OnError called %d times, want 3", failures.Load())
	}
	logMu.Lock()
	logs := logbuf.String()
	logMu.Unlock()
	if n := strings.Count(logs, "a commit failed"); n != 1 {
		t.Errorf("the first failure is logged %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs, "writes succeed again") || !strings.Contains(logs, "failed_commits=3") {
		t.Errorf("the recovery is not logged with its count:\n%s", logs)
	}

	// A failed commit that cannot be cut back out (truncate fails too)
	// fails every commit until the cut succeeds; then writes resume.
	ff.full.Store(true)
	ff.truncFails.Store(true)
	if err := put("six"); err == nil {
		t.Fatal("a full disk acknowledged a write")
	}
	ff.full.Store(false)
	if err := put("seven"); err == nil || !strings.Contains(err.Error(), "still holds the bytes of a failed commit") {
		t.Fatalf("a commit after an uncut failure: %v", err)
	}
	ff.truncFails.Store(false)
	if err := put("eight"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(readLines(t, dir), ","); got != "one,five,eight" {
		t.Errorf("ledger %q, want one,five,eight", got)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
