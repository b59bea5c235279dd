// Package ledgerlog owns the accountant's durable ledger: decisions.jsonl
// under the data directory, one ledger row per line, append-only.
//
// Writes use group commit. Callers Append encoded lines and get a sequence
// number; one writer goroutine takes everything queued, writes it, fsyncs
// once, and only then marks those sequence numbers durable, so concurrent
// ingest batches share a single fsync and a batch is acknowledged only once
// it is on disk. There is never an fsync per row.
//
// When the active file passes MaxFileBytes it is renamed to
// decisions-<UTC timestamp>.jsonl (kept for replay and govern preview) and a
// new decisions.jsonl is started.
//
// After a crash the last line of decisions.jsonl may be torn (a write cut
// short). Open truncates it with a logged warning: a torn line was never
// acknowledged, because acknowledgement waits for the fsync that follows
// the whole write.
//
// A failed write or fsync is sticky: the page cache can no longer be
// trusted to match the file, so every later Wait returns the error and the
// accountant stops acknowledging ingests until it is restarted and replays
// what the disk holds.
package ledgerlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// ActiveName is the file being appended to.
const ActiveName = "decisions.jsonl"

// DefaultMaxFileBytes is the default rotation size.
const DefaultMaxFileBytes = 256 << 20

// Options configure a Log.
type Options struct {
	// MaxFileBytes rotates the active file once it is at least this large.
	// Zero: DefaultMaxFileBytes.
	MaxFileBytes int64
	// Logger receives warnings (torn tail). Nil: slog.Default().
	Logger *slog.Logger
	// OnSync, when set, is called after every group commit with the fsync's
	// duration, the bytes and the batches it made durable.
	OnSync func(fsync time.Duration, bytes, batches int)
	// Now names rotated files. Nil: time.Now.
	Now func() time.Time
}

// Log is an open ledger. Append and Wait are safe for concurrent use.
type Log struct {
	dir  string
	opts Options

	mu       sync.Mutex
	queue    [][]byte
	queued   uint64 // sequence number of the last Append
	durable  uint64 // every sequence number up to this one is on disk
	err      error  // sticky write or fsync failure
	commitCh chan struct{}
	closing  bool
	size     int64 // bytes in the active file, written or queued
	written  int64 // bytes appended since Open, all files

	wake chan struct{}
	done chan struct{}
	f    *os.File // owned by the writer goroutine after Open
}

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("ledgerlog: the ledger is closed")

// Open opens (creating when needed) the ledger in dir, repairs a torn last
// line, and starts the writer.
func Open(dir string, opts Options) (*Log, error) {
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("ledgerlog: creating data directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, ActiveName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ledgerlog: opening %s: %w", path, err)
	}
	size, err := repairTail(f, path, opts.Logger)
	if err != nil {
		f.Close()
		return nil, err
	}
	l := &Log{
		dir: dir, opts: opts, f: f, size: size,
		commitCh: make(chan struct{}),
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	go l.writer()
	return l, nil
}

// repairTail truncates a torn last line and returns the file's size.
func repairTail(f *os.File, path string, log *slog.Logger) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("ledgerlog: %s: %w", path, err)
	}
	size := st.Size()
	if size == 0 {
		return 0, nil
	}
	// Walk back to the last newline, a block at a time.
	const block = 64 << 10
	buf := make([]byte, block)
	end := size
	for end > 0 {
		start := max(end-block, 0)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("ledgerlog: reading the tail of %s: %w", path, err)
		}
		for i := n - 1; i >= 0; i-- {
			if buf[i] == '\n' {
				keep := start + int64(i) + 1
				if keep == size {
					return size, nil
				}
				return truncate(f, path, size, keep, log)
			}
		}
		end = start
	}
	return truncate(f, path, size, 0, log)
}

func truncate(f *os.File, path string, size, keep int64, log *slog.Logger) (int64, error) {
	log.Warn("ledger: truncating a torn last line left by a crash (it was never acknowledged)",
		"file", path, "bytes_dropped", size-keep, "offset", keep)
	if err := f.Truncate(keep); err != nil {
		return 0, fmt.Errorf("ledgerlog: truncating the torn tail of %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("ledgerlog: syncing %s after truncation: %w", path, err)
	}
	return keep, nil
}

// Append queues p (whole lines, each ending in '\n') and returns its
// sequence number; Wait for it before acknowledging anything in it.
func (l *Log) Append(p []byte) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return 0, ErrClosed
	}
	if l.err != nil {
		return 0, l.err
	}
	l.queue = append(l.queue, p)
	l.queued++
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return l.queued, nil
}

// Next returns the sequence number the next Append will get.
func (l *Log) Next() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.queued + 1
}

// Wait blocks until sequence number seq is durable, the log failed, or ctx
// ends. Sequence number 0 is always durable.
func (l *Log) Wait(ctx context.Context, seq uint64) error {
	l.mu.Lock()
	for {
		if l.durable >= seq {
			l.mu.Unlock()
			return nil
		}
		if l.err != nil {
			err := l.err
			l.mu.Unlock()
			return err
		}
		ch := l.commitCh
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		l.mu.Lock()
	}
}

// Err returns the sticky write failure, if any.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Written returns the bytes appended since Open, and the size of the active
// file.
func (l *Log) Written() (total, active int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.written, l.size
}

// Close writes and syncs everything queued, then closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		<-l.done
		return l.Err()
	}
	l.closing = true
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.f.Close(); err != nil && l.err == nil {
		l.err = fmt.Errorf("ledgerlog: closing %s: %w", ActiveName, err)
	}
	return l.err
}

// writer is the group-commit loop.
func (l *Log) writer() {
	defer close(l.done)
	for {
		<-l.wake
		for {
			l.mu.Lock()
			batch, upto, closing := l.queue, l.queued, l.closing
			l.queue = nil
			l.mu.Unlock()
			if len(batch) == 0 {
				if closing {
					return
				}
				break
			}
			l.commit(batch, upto)
		}
	}
}

// commit writes one group, fsyncs once, and publishes it as durable.
func (l *Log) commit(batch [][]byte, upto uint64) {
	n := 0
	var err error
	for _, p := range batch {
		if err != nil {
			break
		}
		var w int
		w, err = l.f.Write(p)
		n += w
	}
	var d time.Duration
	if err == nil {
		t0 := time.Now()
		err = l.f.Sync()
		d = time.Since(t0)
	}
	l.mu.Lock()
	l.size += int64(n)
	l.written += int64(n)
	if err != nil {
		if l.err == nil {
			l.err = fmt.Errorf("ledgerlog: writing %s: %w (ingest stops acknowledging; restart the accountant to replay what is on disk)", filepath.Join(l.dir, ActiveName), err)
		}
	} else {
		l.durable = upto
	}
	close(l.commitCh)
	l.commitCh = make(chan struct{})
	rotate := err == nil && l.size >= l.opts.MaxFileBytes
	l.mu.Unlock()
	if err == nil && l.opts.OnSync != nil {
		l.opts.OnSync(d, n, len(batch))
	}
	if rotate {
		l.rotate()
	}
}

// rotate renames the active file and opens a fresh one.
func (l *Log) rotate() {
	active := filepath.Join(l.dir, ActiveName)
	rotated := filepath.Join(l.dir, RotatedName(l.opts.Now()))
	err := l.f.Close()
	if err == nil {
		err = os.Rename(active, rotated)
	}
	var f *os.File
	if err == nil {
		f, err = os.OpenFile(active, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	}
	if err == nil {
		err = syncDir(l.dir)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if l.err == nil {
			l.err = fmt.Errorf("ledgerlog: rotating %s: %w", active, err)
		}
		return
	}
	l.f = f
	l.size = 0
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
