package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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

// planeConfig is the fleet's config: the seed tree, a roomy rpm per user,
// and a share rpm on dev2 (10 a minute for the fleet, divided by the live
// replica count each accountant reports).
const planeConfig = policyTenants + `  limits:
    - id: user_rpm
      attach: { level: user }
      type: rpm
      amount: 1000
      period: 1m
    - id: dev2_share
      attach: { node: "org:acme/team:ml/user:dev2" }
      type: rpm
      amount: 10
      period: 1m
      store: share
`

// statusOn answers the status of one chat completion through replica r.
func statusOn(ctx context.Context, t *testing.T, r *fleettest.Replica, key string) int {
	t.Helper()
	a, err := chat(ctx, r.URL, key)
	if err != nil {
		t.Fatalf("replica %d: %v", r.Index, err)
	}
	return a.status
}

// everywhere waits until every replica answers key with status.
func everywhere(ctx context.Context, t *testing.T, f *fleettest.Fleet, key string, status int, what string) {
	t.Helper()
	for _, r := range f.Replicas() {
		if !r.Running() {
			continue
		}
		eventually(ctx, t, fmt.Sprintf("%s on replica %d", what, r.Index), func() (bool, string) {
			got := statusOn(ctx, t, r, key)
			return got == status, fmt.Sprintf("status %d", got)
		})
	}
}

// TestFleetSharesOneRuntimePlane runs three `tokentriage dev` processes,
// replica 0 owning the runtime plane and the others mirroring it: a key
// minted on the owner works on all three, and revoked, stops on all
// three; a key minted through a mirror is made on the owner; with the
// owner killed the mirrors keep serving their copy (one restarted
// meanwhile too), refuse management writes naming the owner, and say so
// in /healthz, and mirror it again once it is back.
func TestFleetSharesOneRuntimePlane(t *testing.T) {
	ctx := testContext(t)
	f := fleettest.Start(t, fleettest.Options{Replicas: 3, Config: writeConfig(t, planeConfig)})
	owner := &api.Client{BaseURL: f.Owner().AccountantURL, Token: f.AdminToken}
	mirror := &api.Client{BaseURL: f.Replica(1).AccountantURL, Token: f.AdminToken}

	k, err := owner.MintKey(ctx, dev1, vkey.Scopes{})
	if err != nil {
		t.Fatal(err)
	}
	everywhere(ctx, t, f, k.Key, http.StatusOK, "the key minted on the owner served")
	if _, err := owner.RevokeKey(ctx, k.KID); err != nil {
		t.Fatal(err)
	}
	everywhere(ctx, t, f, k.Key, http.StatusUnauthorized, "the revoked key refused")

	viaMirror, err := mirror.MintKey(ctx, dev1, vkey.Scopes{})
	if err != nil {
		t.Fatalf("minting through a mirror: %v", err)
	}
	if keys, err := owner.ListKeys(ctx, dev1); err != nil || !hasKey(keys, viaMirror.KID) {
		t.Fatalf("the key minted through a mirror is not on the owner: %v", err)
	}
	everywhere(ctx, t, f, viaMirror.Key, http.StatusOK, "the key minted through a mirror served")

	// The owner is killed: the mirrors serve their copy.
	f.Kill(0)
	for _, r := range f.Replicas()[1:] {
		if got := statusOn(ctx, t, r, viaMirror.Key); got != http.StatusOK {
			t.Errorf("replica %d answered %d with the owner down", r.Index, got)
		}
	}
	_, err = mirror.MintKey(ctx, dev1, vkey.Scopes{})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || !strings.Contains(ae.Message, "mirrors the runtime plane of "+f.Owner().AccountantURL) {
		t.Errorf("a write to a mirror with the owner down: %v", err)
	}
	eventually(ctx, t, "the mirror's health saying the owner is away", func() (bool, string) {
		h := httpGet(ctx, t, f.Replica(2).AccountantURL+"/healthz")
		return strings.Contains(h, "the owner has not answered since") && strings.Contains(h, "serving the last copy"), h
	})
	// A mirror restarted while the owner is away serves the copy on its disk.
	f.Kill(2)
	f.Restart(2)
	if got := statusOn(ctx, t, f.Replica(2), viaMirror.Key); got != http.StatusOK {
		t.Errorf("a mirror restarted with the owner down answered %d", got)
	}

	// The owner is back: the mirrors follow it again.
	f.Restart(0)
	again, err := mirror.MintKey(ctx, dev1, vkey.Scopes{})
	if err != nil {
		t.Fatalf("minting through a mirror once the owner is back: %v", err)
	}
	everywhere(ctx, t, f, again.Key, http.StatusOK, "a key minted after the owner came back served")
	eventually(ctx, t, "the mirror's health saying it mirrors again", func() (bool, string) {
		h := httpGet(ctx, t, f.Replica(2).AccountantURL+"/healthz")
		return strings.Contains(h, "runtime plane: mirror of "+f.Owner().AccountantURL+"; version "), h
	})
}

func hasKey(keys []api.KeyView, kid string) bool {
	for _, k := range keys {
		if k.KID == kid {
			return true
		}
	}
	return false
}

func httpGet(ctx context.Context, t *testing.T, url string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	_, b := testkit.Send(t, req)
	return string(b)
}

// metric reads one unlabelled metric of an accountant.
func metric(ctx context.Context, t *testing.T, acct, name string) string {
	t.Helper()
	for _, line := range strings.Split(httpGet(ctx, t, acct+"/metrics"), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	t.Fatalf("no metric %s at %s", name, acct)
	return ""
}

// TestFleetInternalPlaneNeedsTheToken: against a replica of a running
// fleet, ingest and sync without the internal token or with a wrong one
// are refused and count nothing: no row is recorded, and a flood of polls
// under made-up replica names does not shrink a share cap (the replica
// still admits the cap's full 10 a minute).
func TestFleetInternalPlaneNeedsTheToken(t *testing.T) {
	ctx := testContext(t)
	f := fleettest.Start(t, fleettest.Options{Replicas: 2, Config: writeConfig(t, planeConfig)})
	r := f.Replica(1)
	rowsBefore := metric(ctx, t, r.AccountantURL, "tt_accountant_rows_ingested_total")
	now := time.Now().UTC()
	row := string(ledgerlog.AppendRow(nil, &ledger.Row{
		RequestID: "tt_aaaaaaaaaaaaaaaaaaaaaaaaaa", Start: now.Add(-time.Second), End: now, Node: dev1,
		Endpoint: "/v1/chat/completions", Provider: "openai", Model: "gpt-4o", Served: "gpt-4o",
		Usage: ledger.Usage{Input: 1_000_000, Output: 1_000_000, Total: 2_000_000}, Status: 200, Decision: ledger.Admitted, Replica: "evil",
	}))
	for _, auth := range []string{"", "Bearer not-the-token", "Bearer " + f.AdminToken} {
		for i := range 20 {
			for _, c := range []struct{ method, path, body string }{
				{http.MethodPost, syncwire.IngestPath + "?replica=evil", row},
				{http.MethodGet, fmt.Sprintf("%s?replica=made-up-%d", syncwire.SyncPath, i), ""},
			} {
				req, _ := http.NewRequestWithContext(ctx, c.method, r.AccountantURL+c.path, strings.NewReader(c.body))
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("%s %s with %q: %d, want 401", c.method, c.path, auth, resp.StatusCode)
				}
			}
		}
	}
	if got := metric(ctx, t, r.AccountantURL, "tt_accountant_rows_ingested_total"); got != rowsBefore {
		t.Errorf("rows ingested went from %s to %s through refused calls", rowsBefore, got)
	}
	if got := metric(ctx, t, r.AccountantURL, "tt_accountant_replicas_live"); got != "1" {
		t.Errorf("live replicas %s after polls under made-up names, want 1 (the replica's own filter)", got)
	}
	k, err := (&api.Client{BaseURL: f.Owner().AccountantURL, Token: f.AdminToken}).MintKey(ctx, dev2, vkey.Scopes{})
	if err != nil {
		t.Fatal(err)
	}
	everywhere(ctx, t, f, k.Key, http.StatusOK, "dev2's key served") // one request on each replica
	admitted := 1
	for range 12 {
		if statusOn(ctx, t, r, k.Key) == http.StatusOK {
			admitted++
		}
	}
	if admitted != 10 {
		t.Errorf("replica 1 admitted %d of dev2's requests, want the share cap's full 10 (one replica polls it)", admitted)
	}
}

// chat sends one chat completion to the gateway at base with key (none
// if "").
func chat(ctx context.Context, base, key string) (answer, error) {
	if key == "" {
		return call(ctx, base, "/v1/chat/completions")
	}
	return call(ctx, base, "/v1/chat/completions", "Authorization", "Bearer "+key)
}
