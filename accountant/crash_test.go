package accountant

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// childEnv makes the test binary run an accountant instead of the tests
// (the crash test re-executes itself).
const childEnv = "TT_ACCOUNTANT_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

// runChild serves an accountant on a free loopback port and prints the
// address as its first line of stdout.
func runChild() int {
	s, err := New(Options{
		ConfigPath: os.Getenv("TT_CHILD_CONFIG"), DataDir: os.Getenv("TT_CHILD_DATA"), InternalToken: testInternalToken,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		// Small files so the test crosses rotations too.
		LedgerMaxFileBytes: 256 << 10,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(ln.Addr().String())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := s.Serve(ctx, ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

const crashConfig = `governance:
  enabled: true
  limits:
    - id: all_requests
      attach: { node: __global }
      type: quota_requests
      amount: 100000000
      period: month
`

type child struct {
	cmd  *exec.Cmd
	addr string
}

func startChild(t *testing.T, cfg, data string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "TT_CHILD_CONFIG="+cfg, "TT_CHILD_DATA="+data)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("accountant child did not start: %v", err)
	}
	return &child{cmd: cmd, addr: strings.TrimSpace(line)}
}

// TestCrashLosesNoAcknowledgedRow streams ingest batches at an accountant
// child process, SIGKILLs it mid-stream, restarts it on the same data
// directory, and checks that every acknowledged row is in the ledger and
// counted exactly once; then it retries every batch (as filters retry what
// was not acknowledged) and checks every row is counted exactly once.
func TestCrashLosesNoAcknowledgedRow(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, crashConfig)
	data := filepath.Join(dir, "data")

	const senders, perBatch = 4, 50
	var mu sync.Mutex
	var batches [][]byte       // every batch sent (or about to be)
	acked := map[string]bool{} // request ids of acknowledged rows
	ackedBatches := 0

	c := startChild(t, cfg, data)
	client := internalClient
	killAt := 40 // acknowledged batches before the kill
	killed := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; ; b++ {
				rows := make([]ledger.Row, perBatch)
				ids := make([]string, perBatch)
				for i := range rows {
					ids[i] = reqID(1 + s*1_000_000 + b*perBatch + i)
					rows[i] = row(ids[i], time.Now().UTC(), "", "gpt-4o-mini", 10, 10)
				}
				body := batch(rows...)
				mu.Lock()
				batches = append(batches, body)
				mu.Unlock()
				resp, err := client.Post("http://"+c.addr+syncwire.IngestPath, "application/x-ndjson", bytes.NewReader(body))
				if err != nil {
					return // the process is gone
				}
				var ack syncwire.IngestAck
				err = json.NewDecoder(resp.Body).Decode(&ack)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					return
				}
				if ack.Accepted != perBatch {
					t.Errorf("ack %+v", ack)
				}
				mu.Lock()
				for _, id := range ids {
					acked[id] = true
				}
				ackedBatches++
				if ackedBatches == killAt {
					once.Do(func() {
						c.cmd.Process.Signal(syscall.SIGKILL)
						close(killed)
					})
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-killed:
	case <-time.After(2 * time.Minute):
		t.Fatal("the stream never reached the kill point")
	}
	wg.Wait()
	c.cmd.Wait()
	t.Logf("killed after %d acknowledged batches; %d batches sent", ackedBatches, len(batches))

	// Restart: every acknowledged row is on disk once and counted. (The
	// restarted ledger has set its torn tail aside and commits nothing
	// until the retries below, so reading its files now races nothing.)
	c = startChild(t, cfg, data)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			c.cmd.Process.Signal(syscall.SIGTERM)
			c.cmd.Wait()
		}
	}
	defer stop()
	counts := ledgerIDs(t, data)
	for id := range acked {
		if counts[id] != 1 {
			t.Fatalf("acknowledged row %s is in the ledger %d times", id, counts[id])
		}
	}
	for id, n := range counts {
		if n != 1 {
			t.Fatalf("row %s is in the ledger %d times", id, n)
		}
	}
	if got := counter(t, client, c.addr); got != int64(len(counts)) || got < int64(len(acked)) {
		t.Fatalf("after restart the counter is %d; ledger holds %d rows, %d acknowledged", got, len(counts), len(acked))
	}

	// Retry every batch: each row is counted exactly once.
	total := 0
	for _, body := range batches {
		resp, err := client.Post("http://"+c.addr+syncwire.IngestPath, "application/x-ndjson", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var ack syncwire.IngestAck
		json.NewDecoder(resp.Body).Decode(&ack)
		resp.Body.Close()
		if ack.Accepted+ack.Duplicates != perBatch || ack.Rejected != 0 {
			t.Fatalf("retry ack %+v", ack)
		}
		total += perBatch
	}
	if got := counter(t, client, c.addr); got != int64(total) {
		t.Fatalf("after retries the counter is %d, want %d", got, total)
	}
	// A live ledger rotates after it acknowledges (the active file
	// renamed, a new one opened): a reader that listed the active file
	// just before would open the new, empty one and miss a whole file of
	// rows. Read it once the process has stopped, its last rotation done.
	stop()
	counts = ledgerIDs(t, data)
	if len(counts) != total {
		t.Fatalf("ledger holds %d distinct rows, want %d", len(counts), total)
	}
	for id, n := range counts {
		if n != 1 {
			t.Fatalf("row %s is in the ledger %d times", id, n)
		}
	}
}

func ledgerIDs(t *testing.T, dir string) map[string]int {
	t.Helper()
	files, err := ledgerlog.Files(dir, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, f := range files {
		err := ledgerlog.ScanFile(f, func(line []byte) error {
			r, err := ledgerlog.ParseRow(line)
			if err != nil {
				return fmt.Errorf("%s: %v", f, err)
			}
			out[r.RequestID]++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func counter(t *testing.T, client *http.Client, addr string) int64 {
	t.Helper()
	resp, err := client.Get("http://" + addr + syncwire.SyncPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var s syncwire.Sync
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("sync: %v: %s", err, b)
	}
	for _, e := range s.Snapshot.Entries {
		if strings.HasPrefix(e.ID, "all_requests|") {
			return e.Value
		}
	}
	return 0
}
