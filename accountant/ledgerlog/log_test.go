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

func TestTornTailIsTruncated(t *testing.T) {
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
	if !strings.Contains(logbuf.String(), "torn last line") || !strings.Contains(logbuf.String(), "bytes_dropped=5") {
		t.Errorf("warning not logged: %s", logbuf.String())
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
