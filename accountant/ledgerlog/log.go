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
// short). A torn line was never acknowledged, because acknowledgement waits
// for the fsync that follows the whole write; Open moves its bytes aside to
// decisions.jsonl.torn-<UTC timestamp> (for inspection, never replayed) and
// cuts the ledger back to its last whole line, with a logged warning.
//
// A failed write or fsync fails the commit: every sequence number in it
// gets the error from Wait, and the file is cut back to the size of the
// last commit that succeeded, so nothing of the failed commit stays in it
// (after a failed fsync the page cache can no longer be trusted for the
// bytes written since the last good one, and only those). The next commit
// is tried as usual: a full disk that gets space back is written again
// without a restart. OnError sees every failed commit; the first failure
// after a success is logged at once, later ones at most once per
// failLogEvery with their count, and the first success after failures is
// logged as a recovery.
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

// TornPrefix starts the name of a file holding a torn tail moved aside at
// Open: decisions.jsonl.torn-<UTC timestamp>.
const TornPrefix = ActiveName + ".torn-"

// failLogEvery bounds how often repeated commit failures are logged.
const failLogEvery = 10 * time.Second

// maxFailures bounds the failed ranges remembered for Wait.
const maxFailures = 1024

// Options configure a Log.
type Options struct {
	// MaxFileBytes rotates the active file once it is at least this large.
	// Zero: DefaultMaxFileBytes.
	MaxFileBytes int64
	// Logger receives warnings (torn tail, failed and recovered writes).
	// Nil: slog.Default().
	Logger *slog.Logger
	// OnSync, when set, is called after every group commit with the fsync's
	// duration, the bytes and the batches it made durable.
	OnSync func(fsync time.Duration, bytes, batches int)
	// OnError, when set, is called after every group commit that failed,
	// with the error and the batches it failed.
	OnError func(err error, batches int)
	// Now names rotated and torn files and times failures. Nil: time.Now.
	Now func() time.Time

	// open opens the active file (tests inject faults through it). Nil:
	// os.OpenFile for appending.
	open func(path string) (file, error)
}

// file is what the writer needs of the active file.
type file interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
}

func openAppend(path string) (file, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
}

// Log is an open ledger. Append and Wait are safe for concurrent use.
type Log struct {
	dir  string
	opts Options

	mu     sync.Mutex
	queue  [][]byte
	queued uint64 // sequence number of the last Append
	// resolved: every sequence number up to this one is durable, or failed
	// (then it lies in a range of failed, or at or below forgotten).
	resolved  uint64
	failed    []failure
	forgotten uint64
	// failing is the error of the last commit when it failed (Err); nil
	// once a commit succeeds.
	failing       error
	failingSince  time.Time
	failedCommits int64 // since the last success
	lastFailLog   time.Time
	commitCh      chan struct{}
	closing       bool
	size          int64 // bytes of the active file, every one durable
	written       int64 // bytes made durable since Open, all files

	wake chan struct{}
	done chan struct{}
	// Owned by the writer goroutine after Open.
	f file
	// broken is set when a failed commit could not be cut back out of the
	// file; the writer retries the cut before every commit and fails the
	// commit while it does not succeed.
	broken error
}

// failure is a range of sequence numbers whose commit failed.
type failure struct {
	lo, hi uint64
	err    error
}

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("ledgerlog: the ledger is closed")

// Open opens (creating when needed) the ledger in dir, moves a torn last
// line aside, and starts the writer.
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
	if opts.open == nil {
		opts.open = openAppend
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ledgerlog: creating data directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, ActiveName)
	rf, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ledgerlog: opening %s: %w", path, err)
	}
	size, err := repairTail(rf, path, opts)
	rf.Close()
	if err != nil {
		return nil, err
	}
	f, err := opts.open(path)
	if err != nil {
		return nil, fmt.Errorf("ledgerlog: opening %s: %w", path, err)
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

// repairTail moves a torn last line aside and returns the file's size
// without it.
func repairTail(f *os.File, path string, opts Options) (int64, error) {
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
				return setTornAside(f, path, size, keep, opts)
			}
		}
		end = start
	}
	return setTornAside(f, path, size, 0, opts)
}

// setTornAside copies the torn bytes from keep to size into a file of
// their own, durably, then cuts them from the ledger.
func setTornAside(f *os.File, path string, size, keep int64, opts Options) (int64, error) {
	aside := filepath.Join(filepath.Dir(path), TornPrefix+opts.Now().UTC().Format(rotatedLayout))
	out, err := os.OpenFile(aside, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_, err = io.Copy(out, io.NewSectionReader(f, keep, size-keep))
		if err == nil {
			err = out.Sync()
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		return 0, fmt.Errorf("ledgerlog: %s ends in a torn line (%d bytes a crash cut short), and keeping it aside in %s failed: %w; free space there or move the file away, then start again",
			path, size-keep, aside, err)
	}
	opts.Logger.Warn("ledger: a torn last line left by a crash (never acknowledged) was moved aside",
		"file", path, "bytes", size-keep, "offset", keep, "kept_in", aside)
	if err := f.Truncate(keep); err != nil {
		return 0, fmt.Errorf("ledgerlog: cutting the torn tail of %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("ledgerlog: syncing %s after cutting its torn tail: %w", path, err)
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

// Wait blocks until sequence number seq is durable (nil), its commit failed
// (the error), or ctx ends. Sequence number 0 is always durable.
func (l *Log) Wait(ctx context.Context, seq uint64) error {
	l.mu.Lock()
	for {
		if l.resolved >= seq {
			err := l.outcomeLocked(seq)
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

// outcomeLocked is the outcome of a resolved sequence number.
func (l *Log) outcomeLocked(seq uint64) error {
	if seq == 0 {
		return nil
	}
	for i := len(l.failed) - 1; i >= 0; i-- {
		if f := l.failed[i]; seq >= f.lo && seq <= f.hi {
			return f.err
		}
	}
	if seq <= l.forgotten {
		return fmt.Errorf("ledgerlog: the outcome of commit %d is no longer known (more than %d failed commits since); send the rows again", seq, maxFailures)
	}
	return nil
}

// Err returns the failure of the last commit, or nil when it succeeded
// (also after earlier ones failed).
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failing
}

// Written returns the bytes made durable since Open, and the size of the
// active file.
func (l *Log) Written() (total, active int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.written, l.size
}

// Close writes and syncs everything queued, then closes the file. It
// returns the failure of the last commit, if any.
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
	if err := l.f.Close(); err != nil && l.failing == nil {
		l.failing = fmt.Errorf("ledgerlog: closing %s: %w", ActiveName, err)
	}
	return l.failing
}

// writer is the group-commit loop.
func (l *Log) writer() {
	defer close(l.done)
	for {
		<-l.wake
		for {
			l.mu.Lock()
			batch, from, upto, closing := l.queue, l.resolved+1, l.queued, l.closing
			l.queue = nil
			l.mu.Unlock()
			if len(batch) == 0 {
				if closing {
					return
				}
				break
			}
			l.commit(batch, from, upto)
		}
	}
}

// commit writes one group, fsyncs once, and publishes it as durable, or as
// failed with the file cut back to its last durable size.
func (l *Log) commit(batch [][]byte, from, upto uint64) {
	path := filepath.Join(l.dir, ActiveName)
	var err error
	var n int
	var d time.Duration
	if l.broken != nil {
		if rerr := l.cutBack(); rerr != nil {
			err = fmt.Errorf("ledgerlog: %s still holds the bytes of a failed commit, and cutting them off failed: %w", path, rerr)
		}
	}
	if err == nil {
		n, d, err = l.write(batch, path)
		if err != nil {
			// Whatever of the group reached the file goes: its callers are
			// told it failed, and after a failed write or fsync the page
			// cache cannot be trusted for it.
			if rerr := l.cutBack(); rerr != nil {
				l.broken = rerr
			}
		}
	}
	l.mu.Lock()
	var now time.Time
	if err != nil || l.failing != nil {
		now = l.opts.Now() // only then: rotation names come from Now too
	}
	if err != nil {
		l.failLocked(from, upto, err, now)
	} else {
		l.size += int64(n)
		l.written += int64(n)
		if l.failing != nil {
			l.opts.Logger.Warn("ledger: writes succeed again; ingest acknowledges again",
				"file", path, "failed_commits", l.failedCommits, "failing_for", now.Sub(l.failingSince).Round(time.Millisecond).String())
		}
		l.failing, l.failedCommits = nil, 0
	}
	l.resolved = upto
	close(l.commitCh)
	l.commitCh = make(chan struct{})
	rotate := err == nil && l.size >= l.opts.MaxFileBytes
	l.mu.Unlock()
	if err == nil && l.opts.OnSync != nil {
		l.opts.OnSync(d, n, len(batch))
	}
	if err != nil && l.opts.OnError != nil {
		l.opts.OnError(err, len(batch))
	}
	if rotate {
		if rerr := l.rotate(); rerr != nil {
			l.opts.Logger.Error("ledger: rotating failed; writing on in the active file and trying again after the next commit",
				"file", path, "err", rerr)
		}
	}
}

// write appends a group to the active file and fsyncs it once; it returns
// the bytes written and the fsync's duration.
func (l *Log) write(batch [][]byte, path string) (int, time.Duration, error) {
	n := 0
	for _, p := range batch {
		w, err := l.f.Write(p)
		n += w
		if err != nil {
			return n, 0, fmt.Errorf("ledgerlog: writing %s: %w", path, err)
		}
	}
	t0 := time.Now()
	if err := l.f.Sync(); err != nil {
		return n, 0, fmt.Errorf("ledgerlog: syncing %s: %w", path, err)
	}
	return n, time.Since(t0), nil
}

// failLocked records a failed commit of sequence numbers from..upto and
// logs it: the first failure after a success at once, later ones at most
// once per failLogEvery.
func (l *Log) failLocked(from, upto uint64, err error, now time.Time) {
	if k := len(l.failed); k > 0 && l.failed[k-1].hi+1 == from && l.failed[k-1].err.Error() == err.Error() {
		l.failed[k-1].hi = upto
	} else {
		if len(l.failed) == maxFailures {
			l.forgotten = l.failed[0].hi
			l.failed = append(l.failed[:0], l.failed[1:]...)
		}
		l.failed = append(l.failed, failure{lo: from, hi: upto, err: err})
	}
	l.failedCommits++
	if l.failing == nil {
		l.failingSince = now
		l.lastFailLog = now
		l.opts.Logger.Error("ledger: a commit failed; its ingest batches are answered 503 (the filters send them again), and every commit is tried until one succeeds",
			"err", err)
	} else if now.Sub(l.lastFailLog) >= failLogEvery {
		l.lastFailLog = now
		l.opts.Logger.Error("ledger: commits still failing", "err", err, "failed_commits", l.failedCommits,
			"failing_for", now.Sub(l.failingSince).Round(time.Millisecond).String())
	}
	l.failing = err
}

// cutBack truncates the active file to its last durable size and syncs it;
// on success the file is whole again (broken clears).
func (l *Log) cutBack() error {
	err := l.f.Truncate(l.size)
	if err == nil {
		err = l.f.Sync()
	}
	if err != nil {
		return err
	}
	l.broken = nil
	return nil
}

// rotate renames the active file and opens a fresh one. On failure the
// active file stays what it was (renamed back when needed), and rotation
// is tried again after the next commit.
func (l *Log) rotate() error {
	active := filepath.Join(l.dir, ActiveName)
	rotated := filepath.Join(l.dir, RotatedName(l.opts.Now()))
	if err := os.Rename(active, rotated); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := l.opts.open(active)
	if err != nil {
		if rerr := os.Rename(rotated, active); rerr != nil {
			// The open file is the rotated one, which replay reads too.
			return fmt.Errorf("%w; renaming %s back failed too: %v", err, rotated, rerr)
		}
		return err
	}
	if err := syncDir(l.dir); err != nil {
		l.opts.Logger.Warn("ledger: syncing the data directory after rotation", "dir", l.dir, "err", err)
	}
	old := l.f
	l.f = f
	old.Close()
	l.mu.Lock()
	l.size = 0
	l.mu.Unlock()
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
