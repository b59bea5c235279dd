package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/tokentriage/tokentriage/internal/fleettest"
	"github.com/tokentriage/tokentriage/internal/testwasm"
)

// freePorts returns a port p with p to p+n-1 all free on 127.0.0.1 (at the
// moment they were looked at).
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if p+n > 65535 {
			continue
		}
		ok := true
		for i := 1; i < n && ok; i++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+i))
			if err != nil {
				ok = false
				continue
			}
			l.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatal("no run of free ports")
	return 0
}

// TestFleetScriptPorts: `make fleet`'s script runs its replicas on the
// ports it is given (PORT, REDIS_PORT, REPLICAS), prints them, and the
// fleet it starts shares user_rpm across them: the seventh request of its
// own curl loop is a 429.
func TestFleetScriptPorts(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..")
	wasm := os.Getenv("TT_FILTER_WASM")
	if wasm == "" {
		wasm = filepath.Join(t.TempDir(), "filter.wasm")
		if err := os.WriteFile(wasm, testwasm.Filter(t), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	port := freePorts(t, 5)
	redisPort := port + 4
	cmd := exec.Command("sh", "scripts/fleet.sh")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CLI="+fleettest.CLI(t), "WASM="+wasm, "DATA="+t.TempDir(),
		fmt.Sprintf("PORT=%d", port), fmt.Sprintf("REDIS_PORT=%d", redisPort), "REPLICAS=2")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var printed strings.Builder
	serving := make(chan bool, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			printed.WriteString(sc.Text() + "\n")
			if !said && strings.Contains(sc.Text(), "are serving") {
				said = true
				serving <- true
			}
		}
		if !said {
			serving <- false
		}
		cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
	})
	ctx := testContext(t)
	select {
	case ok := <-serving:
		if !ok {
			<-done
			t.Fatalf("the script ended before serving:\n%s", printed.String())
		}
	case <-ctx.Done():
		t.Fatal("the script never said the fleet is serving")
	}
	// Its banner, then its curl loop, by hand.
	for _, want := range []string{fmt.Sprintf("http://127.0.0.1:%d", port), fmt.Sprintf("http://127.0.0.1:%d", port+3), fmt.Sprintf("127.0.0.1:%d", redisPort)} {
		eventually(ctx, t, "the banner names "+want, func() (bool, string) { return strings.Contains(printed.String(), want), printed.String() })
	}
	var key string
	eventually(ctx, t, "the banner's demo key", func() (bool, string) {
		for _, l := range strings.Split(printed.String(), "\n") {
			if k, ok := strings.CutPrefix(strings.TrimSpace(l), "export TT_KEY="); ok {
				key, _, _ = strings.Cut(k, " ")
				return true, ""
			}
		}
		return false, printed.String()
	})
	codes, served := "", 0
	for i := 0; i < 7; i++ {
		p := port + 2*(i%2)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", p),
			strings.NewReader(`{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes += fmt.Sprint(resp.StatusCode, " ")
		if resp.StatusCode == http.StatusOK {
			served++
		}
	}
	// Six served and the seventh refused: the replicas share one amount
	// (each alone would serve all seven). Near an amount's end its last
	// unit may still sit in the other replica's lease (RATIONALE, the
	// fleet's leases), so the sixth may be the first refusal; never more
	// than six served, never fewer than five.
	if !strings.HasSuffix(codes, "429 ") || served < 5 || served > 6 || strings.Contains(codes, "429 200") ||
		strings.Count(codes, "200")+strings.Count(codes, "429") != 7 {
		t.Fatalf("the banner's loop over the two replicas answered %s; want six served (or five) and then user_rpm's refusal", codes)
	}
}
