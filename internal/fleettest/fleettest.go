// Package fleettest runs a fleet of real `tokentriage dev` processes for
// end-to-end tests: the CLI is built once per test binary, and each replica
// is its own process with its own gateway address (--listen), accountant
// address (--accountant-listen) and data directory (--data). Replica 0 owns
// the runtime plane (it is started without --control); every other replica
// mirrors it (--control with replica 0's accountant URL). With
// Options.Redis every replica gets --redis. The fleet shares one admin
// token and one internal token, as a real deployment shares its Secrets.
//
//	f := fleettest.Start(t, fleettest.Options{Config: "testdata/fleet.yaml"})
//	resp, _ := http.Post(f.Replica(1).URL+"/v1/chat/completions", ...)
//	f.Kill(0)      // SIGKILL: nothing flushed
//	f.Restart(0)   // the same addresses and data directory, waited until ready
//
// Start returns once every replica printed its banner (its gateway armed
// with the plan, its demo key minted); teardown stops every replica with
// SIGTERM and waits for it, and a failed test gets the tail of each
// replica's log.
package fleettest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/testwasm"
)

// Options describe a fleet.
type Options struct {
	// Replicas is the number of `tokentriage dev` processes; 0 is 3.
	Replicas int
	// Config is the config file every replica reads (-c).
	Config string
	// Redis, when set, is passed to every replica as --redis HOST:PORT.
	Redis string
	// Workers is each replica's worker VMs (--workers); 0 is 1.
	Workers int
	// Args are more flags for every replica (e.g. --demo-owner NODE).
	Args []string
	// Env are more environment variables (NAME=value) for every replica.
	Env []string
	// NoControl starts every replica as the owner of its own runtime plane
	// (no --control): replicas that share nothing but Redis.
	NoControl bool
}

// Fleet is a running fleet.
type Fleet struct {
	t        testing.TB
	opts     Options
	bin      string
	wasm     string
	cache    string
	dir      string
	replicas []*Replica
	// AdminToken and InternalToken are the fleet's shared tokens
	// (TT_ADMIN_TOKEN and TT_ACCOUNTANT_TOKEN of every replica).
	AdminToken, InternalToken string
}

// Replica is one `tokentriage dev` process.
type Replica struct {
	// Index is the replica's place in the fleet; 0 owns the runtime plane.
	Index int
	// URL is the gateway's base URL; AccountantURL the accountant's.
	URL, AccountantURL string
	// Data is the replica's data directory.
	Data string
	// DemoKey is the key the replica minted at start (TT_KEY of its
	// banner), "" when none was minted.
	DemoKey string

	f      *Fleet
	log    string // the file its stdout and stderr go to
	listen [2]string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // what Wait returned
}

// Start builds the CLI (once per test binary) and starts the fleet: the
// owner first, then the mirrors together, each waited for until it serves.
func Start(t testing.TB, o Options) *Fleet {
	t.Helper()
	if o.Replicas <= 0 {
		o.Replicas = 3
	}
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if o.Config == "" {
		t.Fatal("fleettest: Options.Config is required")
	}
	cfg, err := filepath.Abs(o.Config)
	if err != nil {
		t.Fatal(err)
	}
	o.Config = cfg
	f := &Fleet{
		t: t, opts: o, bin: CLI(t), wasm: wasmFile(t), cache: cacheDir(t), dir: t.TempDir(),
		AdminToken: newToken(), InternalToken: newToken(),
	}
	t.Cleanup(f.teardown)
	for i := range o.Replicas {
		f.replicas = append(f.replicas, &Replica{
			Index: i, f: f, Data: filepath.Join(f.dir, fmt.Sprintf("replica%d", i)),
			log:    filepath.Join(f.dir, fmt.Sprintf("replica%d.log", i)),
			listen: [2]string{"127.0.0.1:0", "127.0.0.1:0"},
		})
	}
	if err := f.replicas[0].start(); err != nil {
		t.Fatalf("fleettest: replica 0: %v", err)
	}
	errs := make([]error, o.Replicas)
	var wg sync.WaitGroup
	for _, r := range f.replicas[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r.Index] = r.start()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("fleettest: %v", err)
	}
	return f
}

// Replica returns replica i.
func (f *Fleet) Replica(i int) *Replica { return f.replicas[i] }

// Replicas returns every replica, the owner first.
func (f *Fleet) Replicas() []*Replica { return f.replicas }

// Owner is replica 0, the owner of the runtime plane.
func (f *Fleet) Owner() *Replica { return f.replicas[0] }

// Kill ends replica i with SIGKILL (nothing is flushed) and waits until
// the process is gone.
func (f *Fleet) Kill(i int) {
	f.t.Helper()
	if err := f.replicas[i].signal(syscall.SIGKILL); err != nil {
		f.t.Fatalf("fleettest: killing replica %d: %v", i, err)
	}
}

// Stop ends replica i with SIGTERM (it finishes requests in flight and
// flushes its ledger) and waits until the process is gone.
func (f *Fleet) Stop(i int) {
	f.t.Helper()
	if err := f.replicas[i].signal(syscall.SIGTERM); err != nil {
		f.t.Fatalf("fleettest: stopping replica %d: %v", i, err)
	}
}

// Restart starts replica i again, after Kill or Stop, on the same
// addresses with the same data directory, and waits until it serves.
func (f *Fleet) Restart(i int) {
	f.t.Helper()
	r := f.replicas[i]
	if r.running() {
		f.t.Fatalf("fleettest: replica %d is still running; Kill or Stop it first", i)
	}
	if err := r.start(); err != nil {
		f.t.Fatalf("fleettest: restarting replica %d: %v", i, err)
	}
}

// Log returns what replica r wrote so far (stdout and stderr).
func (r *Replica) Log() string {
	b, _ := os.ReadFile(r.log)
	return string(b)
}

// Running reports whether the replica's process is alive.
func (r *Replica) Running() bool { return r.running() }

func (r *Replica) running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.exited == nil {
		return false
	}
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

// start runs the replica's process and waits for its banner.
func (r *Replica) start() error {
	f := r.f
	args := []string{"dev", "-c", f.opts.Config,
		"--listen", r.listen[0], "--accountant-listen", r.listen[1],
		"--data", r.Data, "--wasm", f.wasm, "--wasm-cache", f.cache,
		"--workers", fmt.Sprint(f.opts.Workers)}
	if r.Index > 0 && !f.opts.NoControl {
		args = append(args, "--control", f.replicas[0].AccountantURL)
	}
	if f.opts.Redis != "" {
		args = append(args, "--redis", f.opts.Redis)
	}
	args = append(args, f.opts.Args...)
	logf, err := os.OpenFile(r.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== fleettest: tokentriage %s\n", strings.Join(args, " "))
	cmd := exec.Command(f.bin, args...)
	cmd.Env = append(os.Environ(), "TT_ADMIN_TOKEN="+f.AdminToken, "TT_ACCOUNTANT_TOKEN="+f.InternalToken)
	cmd.Env = append(cmd.Env, f.opts.Env...)
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting %s: %w", f.bin, err)
	}
	exited := make(chan struct{})
	r.mu.Lock()
	r.cmd, r.exited, r.err = cmd, exited, nil
	r.mu.Unlock()

	ready := make(chan banner, 1)
	go func() {
		b := readBanner(out, logf)
		ready <- b
		io.Copy(logf, out) // the rest of stdout, until the process ends
		err := cmd.Wait()
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
		fmt.Fprintf(logf, "=== fleettest: exited: %v\n", err)
		logf.Close()
		close(exited)
	}()
	ctx, cancel := deadline(f.t)
	defer cancel()
	select {
	case b := <-ready:
		if !b.complete() {
			<-exited
			return fmt.Errorf("replica %d exited before serving (%v):\n%s", r.Index, r.err, tail(r.Log(), 60))
		}
		r.URL, r.AccountantURL, r.DemoKey = b.gateway, b.accountant, b.key
		r.listen = [2]string{strings.TrimPrefix(b.gateway, "http://"), strings.TrimPrefix(b.accountant, "http://")}
		return nil
	case <-ctx.Done():
		cmd.Process.Kill()
		<-exited
		return fmt.Errorf("replica %d did not serve before the test's deadline:\n%s", r.Index, tail(r.Log(), 60))
	}
}

// signal sends sig to the replica and waits until the process is gone.
func (r *Replica) signal(sig syscall.Signal) error {
	r.mu.Lock()
	cmd, exited := r.cmd, r.exited
	r.mu.Unlock()
	if cmd == nil {
		return errors.New("never started")
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-exited
	return nil
}

// teardown stops every replica still running: SIGTERM, then SIGKILL for one
// that has not exited after StopGrace. A failed test gets each log's tail.
func (f *Fleet) teardown() {
	var wg sync.WaitGroup
	for _, r := range f.replicas {
		if !r.running() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.mu.Lock()
			cmd, exited := r.cmd, r.exited
			r.mu.Unlock()
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(StopGrace):
				cmd.Process.Kill()
				<-exited
			}
		}()
	}
	wg.Wait()
	if f.t.Failed() {
		for _, r := range f.replicas {
			f.t.Logf("fleettest: replica %d (%s, accountant %s) log:\n%s", r.Index, r.URL, r.AccountantURL, tail(r.Log(), 80))
		}
	}
}

// StopGrace is how long teardown waits for a replica to stop on SIGTERM
// before it kills it (dev itself lets requests finish for up to 10 s and
// then flushes the ledger).
const StopGrace = 60 * time.Second

// banner is what a replica printed when it started serving.
type banner struct {
	gateway, accountant, key string
	done                     bool
}

func (b banner) complete() bool { return b.done && b.gateway != "" && b.accountant != "" }

// readBanner reads stdout up to the banner's last line, copying it to log.
func readBanner(out io.Reader, log io.Writer) banner {
	var b banner
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(log, line)
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 2 && fields[0] == "gateway":
			b.gateway = fields[1]
		case len(fields) >= 2 && fields[0] == "accountant":
			b.accountant = fields[1]
		case strings.HasPrefix(line, "  export TT_KEY="):
			b.key = strings.TrimPrefix(line, "  export TT_KEY=")
		case strings.HasPrefix(line, "Ctrl-C stops it"):
			b.done = true
			return b
		}
	}
	return b
}

// deadline is a context that ends a little before the test binary's
// deadline, so a wait that never ends fails with what it saw.
func deadline(t testing.TB) (context.Context, context.CancelFunc) {
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			return context.WithDeadline(context.Background(), d.Add(-30*time.Second))
		}
	}
	return context.WithCancel(context.Background())
}

func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

func newToken() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var (
	buildOnce sync.Once
	builtCLI  string
	buildErr  error
	wasmOnce  sync.Once
	wasmPath  string
	cacheOnce sync.Once
	cachePath string
)

// CLI returns the path of the tokentriage binary, built once per test
// binary from this module ($TT_CLI names a prebuilt one instead).
func CLI(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("TT_CLI"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tt-cli-")
		if err != nil {
			buildErr = err
			return
		}
		out := filepath.Join(dir, "tokentriage")
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", out, "./cmd/tokentriage")
		cmd.Dir = moduleRoot()
		if msg, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building ./cmd/tokentriage: %v\n%s", err, msg)
			return
		}
		builtCLI = out
	})
	if buildErr != nil {
		t.Fatalf("fleettest: %v", buildErr)
	}
	return builtCLI
}

// wasmFile is the built filter as a file: $TT_FILTER_WASM, or the module
// testwasm builds, written once.
func wasmFile(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("TT_FILTER_WASM"); p != "" {
		return p
	}
	b := testwasm.Filter(t)
	wasmOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tt-fleet-wasm-")
		if err != nil {
			return
		}
		p := filepath.Join(dir, "filter.wasm")
		if os.WriteFile(p, b, 0o644) == nil {
			wasmPath = p
		}
	})
	if wasmPath == "" {
		t.Fatal("fleettest: cannot write the filter to a temporary file")
	}
	return wasmPath
}

// cacheDir is one compiled-code cache for every replica of every fleet of
// the test binary, so the filter is compiled once, not once per process.
func cacheDir(t testing.TB) string {
	cacheOnce.Do(func() {
		cachePath, _ = os.MkdirTemp("", "tt-fleet-cache-")
	})
	if cachePath == "" {
		return "off"
	}
	return cachePath
}

func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
