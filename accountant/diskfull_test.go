//go:build linux

package accountant

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// TestLedgerWriteFailureIsLoudAndRecovers runs an accountant process whose
// ledger hits its file size limit (RLIMIT_FSIZE, set on the running
// process: every write past it fails with EFBIG, as on a full disk). A
// batch that cannot be written is answered 503 and never reaches the
// counters; the first failure is logged and counted at once, /healthz
// fails; once writes succeed again (the limit is lifted, without a
// restart) the same batch is recorded afresh and counted once.
func TestLedgerWriteFailureIsLoudAndRecovers(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, crashConfig)
	data := filepath.Join(dir, "data")

	var stderr testkit.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "TT_CHILD_CONFIG="+cfg, "TT_CHILD_DATA="+data)
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("accountant child did not start: %v\n%s", err, stderr.String())
	}
	addr := strings.TrimSpace(line)
	client := internalClient
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	send := func(body []byte) (int, syncwire.IngestAck, string) {
		t.Helper()
		resp, err := client.Post("http://"+addr+syncwire.IngestPath, "application/x-ndjson", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var ack syncwire.IngestAck
		json.Unmarshal(b, &ack)
		return resp.StatusCode, ack, string(b)
	}
	mkBatch := func(from int) []byte {
		rows := make([]ledger.Row, 50)
		for i := range rows {
			rows[i] = row(reqID(from+i), time.Now().UTC(), "", "gpt-4o-mini", 10, 10)
		}
		return batch(rows...)
	}
	first, second := mkBatch(1), mkBatch(1001)
	if code, ack, body := send(first); code != 200 || ack.Accepted != 50 {
		t.Fatalf("first batch: %d %s", code, body)
	}

	// The ledger may grow by a few bytes more, not by a batch.
	st, err := os.Stat(filepath.Join(data, ledgerlog.ActiveName))
	if err != nil {
		t.Fatal(err)
	}
	lim := uint64(st.Size()) + 100
	if err := unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: lim, Max: unix.RLIM_INFINITY}, nil); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	for i := range 3 {
		code, _, body := send(second)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "file too large") {
			t.Fatalf("attempt %d on a full ledger: %d %s, want 503 naming the write failure", i, code, body)
		}
	}
	if got := counter(t, client, addr); got != 50 {
		t.Errorf("the counter is %d while the second batch is not durable; want 50", got)
	}
	if code, body := get("/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz while the ledger fails: %d %s", code, body)
	}
	_, metrics := get("/metrics")
	for _, want := range []string{"tt_accountant_ledger_write_failures_total 3", "tt_accountant_ledger_batches_failed_total 3", "tt_accountant_ledger_failing 1"} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if logs := stderr.String(); strings.Count(logs, "ledger: a commit failed") != 1 || !strings.Contains(logs, "file too large") {
		t.Errorf("the first failure is not logged once, with its cause, while the accountant runs:\n%s", logs)
	}
	if b, _ := os.ReadFile(filepath.Join(data, ledgerlog.ActiveName)); int64(len(b)) != st.Size() {
		t.Errorf("the ledger is %d bytes after failed commits, want the %d of the acknowledged batch", len(b), st.Size())
	}

	// Room again: the same batch is recorded afresh, without a restart.
	if err := unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}, nil); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	if code, ack, body := send(second); code != 200 || ack.Accepted != 50 || ack.Duplicates != 0 {
		t.Fatalf("the second batch once the ledger has room: %d %s, want all 50 accepted", code, body)
	}
	if got := counter(t, client, addr); got != 100 {
		t.Errorf("the counter is %d after recovery, want 100", got)
	}
	if code, body := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz after recovery: %d %s", code, body)
	}
	if _, metrics := get("/metrics"); !strings.Contains(metrics, "tt_accountant_ledger_failing 0\n") {
		t.Errorf("/metrics still reports the ledger failing")
	}
	if !strings.Contains(stderr.String(), "writes succeed again") {
		t.Errorf("the recovery is not logged:\n%s", stderr.String())
	}
	for id, n := range ledgerIDs(t, data) {
		if n != 1 {
			t.Errorf("row %s is in the ledger %d times", id, n)
		}
	}
	if n := len(ledgerIDs(t, data)); n != 100 {
		t.Errorf("the ledger holds %d rows, want 100", n)
	}
}
