package e2e

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/internal/fleettest"
)

// crashConfig: one generous quota, so every request of the crash test is
// governed and served.
const crashConfig = dev1Tenants + `  limits:
    - id: org_requests
      attach: { level: org }
      type: quota_requests
      amount: 100000000
      period: month
`

// CrashWindow is the most traffic a kill -9 of tokentriage dev may lose:
// the rows of requests that finished within this long before the kill. A
// row leaves as its request ends (at most 10 ms later when rows trickle,
// 100 ms when a burst ends just after a send) and is durable one ingest
// round trip after that; measured, the oldest lost row finished 4 to 41 ms
// before the kill. The bound leaves room for a loaded machine
// (RELIABILITY.md).
const CrashWindow = 500 * time.Millisecond

// TestKillLosesAtMostTheCrashWindow serves streamed and plain chat
// completions from a real `tokentriage dev` process to several clients,
// kills the process with SIGKILL mid-traffic, and reads its ledger: every
// request whose response the client had read to its end more than
// CrashWindow before the newest row on disk ended has its row there too. It logs how many rows
// the kill lost and the oldest of them.
func TestKillLosesAtMostTheCrashWindow(t *testing.T) {
	f := fleettest.Start(t, fleettest.Options{Replicas: 1, Config: writeConfig(t, crashConfig), NoControl: true, Workers: 2})
	r := f.Replica(0)
	type served struct {
		id string
		at time.Time
	}
	var (
		mu   sync.Mutex
		done []served
	)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	stopTraffic := traffic(6, func(i int) bool {
		body := `{"model":"gpt-4o-mini","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
		if i%2 == 1 {
			body = `{"model":"gpt-4o-mini","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
		}
		req, _ := http.NewRequest(http.MethodPost, r.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+r.DemoKey)
		resp, err := client.Do(req)
		if err != nil {
			return false // the process is gone
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			if err == nil {
				t.Errorf("status %d", resp.StatusCode)
			}
			return false
		}
		at := time.Now()
		mu.Lock()
		done = append(done, served{resp.Header.Get("X-Tt-Request-Id"), at})
		mu.Unlock()
		return true
	})
	// Traffic runs until a few thousand requests were served, then the
	// process is killed under it.
	for {
		mu.Lock()
		n := len(done)
		mu.Unlock()
		if n >= 1500 {
			break
		}
		if t.Context().Err() != nil {
			t.Fatal("traffic never reached 1,500 served requests")
		}
		time.Sleep(10 * time.Millisecond)
	}
	killed := time.Now()
	f.Kill(0)
	stopTraffic()

	rows := map[string]bool{}
	var newest time.Time // the latest end of a request the ledger holds
	files, err := ledgerlog.Files(r.Data, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		err := ledgerlog.ScanLines(file, func(_ int, line []byte, torn bool) error {
			row, err := ledgerlog.ParseRow(line)
			if err != nil {
				if torn {
					return nil // a write the kill cut short: never acknowledged
				}
				return err
			}
			rows[row.RequestID] = true
			if row.End.After(newest) {
				newest = row.End
			}
			return nil
		})
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(done, func(i, j int) bool { return done[i].at.Before(done[j].at) })
	var lost []served
	for _, s := range done {
		if !rows[s.id] {
			lost = append(lost, s)
		}
	}
	span := done[len(done)-1].at.Sub(done[0].at)
	rate := float64(len(done)) / span.Seconds()
	oldest := time.Duration(0)
	if len(lost) > 0 {
		oldest = killed.Sub(lost[0].at)
	}
	t.Logf("served %d requests in %v (%.0f/s); the kill lost %d rows (%.0f ms of traffic at that rate), the oldest finished %v before the kill",
		len(done), span.Round(time.Millisecond), rate, len(lost), float64(len(lost))/rate*1000, oldest.Round(time.Millisecond))
	// The window is counted back from the newest row the ledger holds, not
	// from the kill: a process the loaded machine did not schedule in its
	// last half second made no progress to lose, and a row missing from
	// before what it did make durable is a hole, however busy the machine.
	t.Logf("the newest row on disk ended %v before the kill", killed.Sub(newest).Round(time.Millisecond))
	for _, s := range lost {
		if age := newest.Sub(s.at); age > CrashWindow {
			t.Errorf("the row of %s, served %v before the kill and %v before the newest row the ledger holds ended, is not in the ledger (the crash window is %v)",
				s.id, killed.Sub(s.at).Round(time.Millisecond), age.Round(time.Millisecond), CrashWindow)
		}
	}
}
