package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/internal/fleettest"
	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// startRows reads the start rows of a replica's ledger whose customer is
// customer, one per request.
func startRows(t *testing.T, r *fleettest.Replica, customer string) []ledger.Row {
	t.Helper()
	files, err := ledgerlog.Files(r.Data, time.Time{})
	if err != nil {
		return nil
	}
	var out []ledger.Row
	seen := map[string]bool{}
	for _, f := range files {
		ledgerlog.ScanFile(f, func(line []byte) error {
			if row, err := ledger.ParseRow(line); err == nil && row.Kind == ledger.KindStart && row.Customer == customer && !seen[row.RequestID] {
				seen[row.RequestID] = true
				out = append(out, row)
			}
			return nil
		})
	}
	return out
}

// TestKilledReplicasCallsAreCounted: a replica SIGKILLed with three
// streamed calls in flight (the stub holds their answers) sent their
// starts within one flush; once it is back, lease_ttl (2 s here) after the
// replay its accountant closes them at their reserved estimate, so the
// fleet's spend report (asked of the other replica) counts the three
// calls, marked estimated. Their ends arriving late replace the estimates:
// still three requests, now with the ends' figures. Before, the calls of
// a killed replica left no row at all; and then a worker VM that had had
// no batch answered yet (no call of its own had ended) sent no start of
// its calls: whichever of the three landed on it were lost.
func TestKilledReplicasCallsAreCounted(t *testing.T) {
	ctx := testContext(t)
	f := fleettest.Start(t, fleettest.Options{Replicas: 2, Config: writeConfig(t, planeConfig), Workers: 2, Args: []string{"--lease-ttl", "2s"}})
	owner := &api.Client{BaseURL: f.Owner().AccountantURL, Token: f.AdminToken}
	k, err := owner.MintKey(ctx, dev1, vkey.Scopes{})
	if err != nil {
		t.Fatal(err)
	}
	everywhere(ctx, t, f, k.Key, http.StatusOK, "dev1's key served")
	victim := f.Replica(1)
	spendNow := func() (requests, estimated, output int64) {
		rep := spendOf(ctx, t, f.Owner().AccountantURL, f.AdminToken, url.Values{"group_by": {"user"}})
		return rep.Total.Requests, rep.Total.EstimatedRequests, rep.Total.OutputTokens
	}
	before, _, _ := spendNow()

	// The held calls name a customer of their own: a start row of a call
	// that served dev1's key above (sent while it ran, with its end) is
	// not one of theirs.
	const heldCustomer = "held-stream"
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := 0; i < 3; i++ {
		go func() {
			body := `{"model":"gpt-4o-mini","max_tokens":500,"stream":true,"messages":[{"role":"user","content":"tell me a long story"}]}`
			req, _ := http.NewRequestWithContext(callCtx, http.MethodPost, victim.URL+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+k.Key)
			req.Header.Set("X-Stub-Delay-Ms", "600000")
			req.Header.Set("X-Tt-Customer", heldCustomer)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	var starts []ledger.Row
	eventually(ctx, t, "three start rows on the replica's ledger", func() (bool, string) {
		starts = startRows(t, victim, heldCustomer)
		return len(starts) == 3, fmt.Sprintf("%d start rows", len(starts))
	})
	f.Kill(1)
	cancel()
	f.Restart(1)
	var closed int64
	eventually(ctx, t, "the three calls in the fleet's spend, estimated", func() (bool, string) {
		n, est, _ := spendNow()
		closed = n
		return n >= before+3 && est == 3, fmt.Sprintf("%d requests (%d before), %d estimated", n, before, est)
	})
	_, _, out := spendNow()
	if want := int64(3 * 500); out < want {
		t.Errorf("%d output tokens in the fleet's spend, want at least the 3 estimates' %d", out, want)
	}

	// The ends come late (a replica's queue sent them after all): they
	// replace the estimates.
	var body []byte
	for _, s := range starts {
		end := s
		end.Kind, end.LeaseTTLMS, end.End, end.Status = ledger.KindEnd, 0, time.Now().UTC(), 200
		end.Usage = ledger.Usage{Input: 9, Output: 133, Total: 142}
		end.Estimated = ledger.Estimated{}
		body = append(end.AppendJSON(body), '\n')
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, victim.AccountantURL+syncwire.IngestPath, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+f.InternalToken)
	resp, ack := testkit.Send(t, req)
	if resp.StatusCode != 200 || !strings.Contains(string(ack), `"accepted":3`) {
		t.Fatalf("the late ends: %d %s", resp.StatusCode, ack)
	}
	eventually(ctx, t, "the late ends in place of the estimates", func() (bool, string) {
		n, est, _ := spendNow()
		return n == closed && est == 0, fmt.Sprintf("%d requests (%d with the estimates), %d estimated", n, closed, est)
	})
}
