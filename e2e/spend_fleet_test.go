package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/accountant/spend"
	"github.com/tokentriage/tokentriage/internal/fleettest"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// spendOf asks the accountant at base for the month's spend report by
// user with token.
func spendOf(ctx context.Context, t *testing.T, base, token string, extra url.Values) *spend.Report {
	t.Helper()
	q := url.Values{"group_by": {"user"}}
	for k, v := range extra {
		q[k] = v
	}
	rep, err := (&api.Client{BaseURL: base, Token: token}).Spend(ctx, q)
	if err != nil {
		t.Fatalf("spend report from %s: %v", base, err)
	}
	return rep
}

// requestsOf is a report's requests of one user ("" the total).
func requestsOf(rep *spend.Report, user string) int64 {
	if user == "" {
		return rep.Total.Requests
	}
	for _, g := range rep.Groups {
		if g.Key["user"] == user {
			return g.Total.Requests
		}
	}
	return 0
}

func answered(rep *spend.Report) string {
	var s []string
	for _, r := range rep.Source.Replicas {
		s = append(s, fmt.Sprintf("%s answered=%v %s", r.Accountant, r.Answered, r.Error))
	}
	return strings.Join(s, "; ")
}

// TestFleetSpendReport runs three `tokentriage dev` replicas, each with
// its own ledger: traffic through each shows up, exactly, in one report
// asked of any of them (the API with the admin token, and a delegated
// admin of one user confined to that user on every replica); with a
// replica killed, the report from the others is flagged partial and
// names it.
func TestFleetSpendReport(t *testing.T) {
	ctx := testContext(t)
	f := fleettest.Start(t, fleettest.Options{Replicas: 3, Config: writeConfig(t, planeConfig)})
	owner := &api.Client{BaseURL: f.Owner().AccountantURL, Token: f.AdminToken}
	k1, err := owner.MintKey(ctx, dev1, vkey.Scopes{})
	if err != nil {
		t.Fatal(err)
	}
	k2, err := owner.MintKey(ctx, dev2, vkey.Scopes{})
	if err != nil {
		t.Fatal(err)
	}
	everywhere(ctx, t, f, k1.Key, http.StatusOK, "dev1's key served")
	// What everywhere sent: one dev1 request per replica.
	sent := map[int]int64{0: 1, 1: 1, 2: 1}
	// Then 2, 3 and 4 more dev1 requests through replicas 0, 1 and 2, and
	// one of dev2 through replica 2.
	for i, r := range f.Replicas() {
		for n := 0; n < 2+i; n++ {
			if got := statusOn(ctx, t, r, k1.Key); got != http.StatusOK {
				t.Fatalf("replica %d answered %d", i, got)
			}
			sent[i]++
		}
	}
	if got := statusOn(ctx, t, f.Replica(2), k2.Key); got != http.StatusOK {
		t.Fatalf("dev2 on replica 2: %d", got)
	}
	var dev1Total int64
	for i, r := range f.Replicas() {
		dev1Total += sent[i]
		want := sent[i]
		eventually(ctx, t, fmt.Sprintf("replica %d's own ledger holding its %d dev1 rows", i, want), func() (bool, string) {
			rep := spendOf(ctx, t, r.AccountantURL, f.AdminToken, url.Values{"fleet": {"false"}})
			got := requestsOf(rep, "org:acme/team:ml/user:dev1")
			return got == want && !rep.Fleet, fmt.Sprintf("%d rows, fleet %v", got, rep.Fleet)
		})
	}

	// A fleet report from any replica: every ledger, each row once.
	for _, r := range f.Replicas() {
		eventually(ctx, t, fmt.Sprintf("the fleet's report from replica %d", r.Index), func() (bool, string) {
			rep := spendOf(ctx, t, r.AccountantURL, f.AdminToken, nil)
			got, got2 := requestsOf(rep, "org:acme/team:ml/user:dev1"), requestsOf(rep, "org:acme/team:ml/user:dev2")
			return rep.Fleet && !rep.Partial && rep.Source.Ledgers == 3 && len(rep.Source.Replicas) == 3 && got == dev1Total && got2 == 1,
				fmt.Sprintf("fleet %v partial %v, %d ledgers, dev1 %d (want %d), dev2 %d; %s", rep.Fleet, rep.Partial, rep.Source.Ledgers, got, dev1Total, got2, answered(rep))
		})
	}

	// A delegated admin of dev1 sees dev1 only, from every replica.
	admin := createAdmin(ctx, t, f, dev1)
	for _, r := range f.Replicas() {
		eventually(ctx, t, fmt.Sprintf("dev1's delegated admin's fleet report from replica %d", r.Index), func() (bool, string) {
			rep, err := (&api.Client{BaseURL: r.AccountantURL, Token: admin}).Spend(ctx, url.Values{"group_by": {"user"}})
			if err != nil {
				return false, err.Error()
			}
			return rep.Fleet && rep.Source.Ledgers == 3 && rep.Total.Requests == dev1Total && len(rep.Groups) == 1 && rep.Source.Rows == 0,
				fmt.Sprintf("%d ledgers, total %d (want %d), %d groups, rows %d", rep.Source.Ledgers, rep.Total.Requests, dev1Total, len(rep.Groups), rep.Source.Rows)
		})
	}
	// Nor can it ask a replica's share directly: that takes the internal
	// token.
	body, _ := json.Marshal(spend.PartialRequest{Query: "group_by=user", Phase: spend.PhaseSeries})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.Replica(1).AccountantURL+"/tt/internal/v1/spend/partial", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+admin)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a share asked with a delegated admin's token: %v %v; want 401", err, resp)
	} else {
		resp.Body.Close()
	}

	// Replica 1 is down: the others' reports leave its ledger out and say
	// so.
	f.Kill(1)
	for _, i := range []int{0, 2} {
		rep := spendOf(ctx, t, f.Replica(i).AccountantURL, f.AdminToken, url.Values{"top": {"5"}})
		var down *spend.ReplicaAnswer
		for j := range rep.Source.Replicas {
			if rep.Source.Replicas[j].Accountant == f.Replica(1).AccountantURL {
				down = &rep.Source.Replicas[j]
			}
		}
		if !rep.Partial || rep.Source.Missing != 1 || rep.Source.Ledgers != 2 || down == nil || down.Answered || down.Error == "" {
			t.Fatalf("replica %d's report with replica 1 down: partial %v, missing %d, ledgers %d; %s", i, rep.Partial, rep.Source.Missing, rep.Source.Ledgers, answered(rep))
		}
		if got := requestsOf(rep, "org:acme/team:ml/user:dev1"); got != dev1Total-sent[1] {
			t.Fatalf("replica %d's partial report counts %d dev1 rows; want %d (replica 1's %d left out)", i, got, dev1Total-sent[1], sent[1])
		}
	}
	// As CSV, the header says it.
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, f.Replica(2).AccountantURL+api.Prefix+"spend?format=csv", nil)
	req.Header.Set("Authorization", "Bearer "+f.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := resp.Header.Get("X-Tt-Spend-Partial"); !strings.Contains(h, "1 of 3 accountants did not answer: "+f.Replica(1).AccountantURL) {
		t.Fatalf("the CSV report's X-Tt-Spend-Partial reads %q", h)
	}
	// The CLI asked of a replica says it too.
	cmd := exec.CommandContext(ctx, fleettest.CLI(t), "spend", "--accountant", f.Replica(0).AccountantURL, "--group-by", "user")
	cmd.Env = append(os.Environ(), "TT_ADMIN_TOKEN="+f.AdminToken)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "fleet: 2 of 3 accountants answered") ||
		!strings.Contains(string(out), "PARTIAL: "+f.Replica(1).AccountantURL+" did not answer") {
		t.Fatalf("tokentriage spend with replica 1 down: %v\n%s", err, out)
	}
	// Back, it is counted again.
	f.Restart(1)
	eventually(ctx, t, "the fleet's report whole again", func() (bool, string) {
		rep := spendOf(ctx, t, f.Replica(2).AccountantURL, f.AdminToken, nil)
		return !rep.Partial && requestsOf(rep, "org:acme/team:ml/user:dev1") == dev1Total, answered(rep)
	})
}

// createAdmin makes a delegated admin of node on the owner and returns
// its token.
func createAdmin(ctx context.Context, t *testing.T, f *fleettest.Fleet, node string) string {
	t.Helper()
	body, _ := json.Marshal(api.AdminRequest{Scope: node})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.Owner().AccountantURL+api.Prefix+"admins", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+f.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out api.CreatedAdmin
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Token == "" {
		t.Fatalf("creating a delegated admin: %d %v", resp.StatusCode, err)
	}
	return out.Token
}
