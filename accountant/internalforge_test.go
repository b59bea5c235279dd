package accountant

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/accountant/spend"
)

// counterValue reads the accountant's counter tt_accountant_<name>.
func counterValue(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	mfs, err := s.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "tt_accountant_"+name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter tt_accountant_%s", name)
	return 0
}

func postInternal(t *testing.T, url string, body []byte) (int, string) {
	t.Helper()
	resp, err := internalClient.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestInternalTokenCannotForgeTheAudit: the internal token reaches the
// owner's mirror-reload endpoint, but the entry it writes is the owner's:
// who is the mirror, the time the owner's clock, the claimed who and time
// kept as reported; an 8 MiB report is refused, and the owner writes at
// most MaxReloadsByMinute a minute.
func TestInternalTokenCannotForgeTheAudit(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, overrideConfig)
	owner := startNode(t, cfg, filepath.Join(dir, "owner"), "127.0.0.1:0", "")
	url := owner.url() + PlaneReloadPath

	huge := fmt.Sprintf(`{"mirror":"m","who":"admin","at":"2001-01-01T00:00:00Z","before":{"config":"c"},"after":{"config":"c","error":%q}}`, strings.Repeat("x", 8<<20))
	if code, body := postInternal(t, url, []byte(huge)); code != http.StatusRequestEntityTooLarge {
		t.Errorf("an 8 MiB report: %d %s", code, body)
	}
	forged := `{"mirror":"10.0.0.9:8791","who":"admin","at":"2001-01-01T00:00:00Z","before":{"config":"tt.yaml","plan":"a"},"after":{"config":"tt.yaml","plan":"b","result":"applied"}}`
	before := time.Now()
	if code, body := postInternal(t, url, []byte(forged)); code != http.StatusNoContent {
		t.Fatalf("a reload report: %d %s", code, body)
	}
	var got *runtime.AuditEntry
	for _, e := range owner.audit() {
		if e.Action == runtime.ActionConfigReload {
			got = &e
		}
	}
	if got == nil {
		t.Fatal("no reload entry")
	}
	var after runtime.ConfigReload
	json.Unmarshal(got.After, &after)
	if got.Who != "mirror:10.0.0.9:8791" || got.At.Before(before.Add(-time.Second)) || after.ReportedBy != "admin" || after.ReportedAt != "2001-01-01T00:00:00Z" {
		t.Errorf("the entry is who %q at %s, reported %q at %q; want the mirror, now, and the claims kept as reported", got.Who, got.At, after.ReportedBy, after.ReportedAt)
	}
	for _, bad := range []string{
		`{"mirror":"m","who":"admin\n2026 admin revoked","at":"2001-01-01T00:00:00Z","before":{},"after":{}}`,
		`{"mirror":"m","who":"a","at":"2001-01-01T00:00:00Z","before":{},"after":{"result":"whatever"}}`,
	} {
		if code, body := postInternal(t, url, []byte(bad)); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s", bad, code, body)
		}
	}
	codes := map[int]int{}
	for range MaxReloadsByMinute + 5 {
		code, _ := postInternal(t, url, []byte(forged))
		codes[code]++
	}
	if codes[http.StatusNoContent] != MaxReloadsByMinute-1 || codes[http.StatusTooManyRequests] != 6 {
		t.Errorf("a flood of reports answered %v; want %d written and the rest 429", codes, MaxReloadsByMinute-1)
	}
}

// TestFleetMembersAreBounded: pulls announcing made-up accountants fill
// the owner's list up to MaxFleetAccountants and no further, without
// pushing out those listed; each refused is counted.
func TestFleetMembersAreBounded(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, overrideConfig)
	owner := startNode(t, cfg, filepath.Join(dir, "owner"), "127.0.0.1:0", "")
	announce := func(name string) {
		b, _ := json.Marshal(planePull{Mirror: name, Accountant: "http://" + name})
		if code, body := postInternal(t, owner.url()+PlanePath, b); code != http.StatusOK {
			t.Fatalf("pull as %s: %d %s", name, code, body)
		}
	}
	announce("real:8791")
	for i := range MaxFleetAccountants + 20 {
		announce(fmt.Sprintf("fake-%d:8791", i))
	}
	members := owner.s.membersAnswer()
	if len(members) != MaxFleetAccountants+1 { // and the owner itself
		t.Errorf("the owner lists %d accountants; want %d and itself", len(members)-1, MaxFleetAccountants)
	}
	listed := false
	for _, m := range members {
		listed = listed || m.Name == "real:8791"
	}
	if !listed {
		t.Error("the first accountant was pushed out of the list")
	}
	if n := counterValue(t, owner.s, "fleet_members_refused_total"); n != 21 {
		t.Errorf("fleet_members_refused_total %v; want 21", n)
	}
}

// TestOversizedShareIsLeftOut: another accountant's share past
// MaxPartialAnswer is not read whole: the report leaves it out, named.
func TestOversizedShareIsLeftOut(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, overrideConfig)
	n := startNode(t, cfg, filepath.Join(dir, "a"), "127.0.0.1:0", "")
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"keys":[`)
		row := []byte(strings.Repeat(`["org:acme"],`, 4096))
		for sent := 0; sent <= MaxPartialAnswer; sent += len(row) {
			if _, err := w.Write(row); err != nil {
				return
			}
		}
		io.WriteString(w, `["x"]]}`)
	}))
	defer huge.Close()
	_, err := n.s.askPartial(context.Background(), huge.URL, spend.PartialRequest{})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("its answer is larger than %d MiB", MaxPartialAnswer>>20)) {
		t.Fatalf("an oversized share: %v", err)
	}
	if v := counterValue(t, n.s, "fleet_shares_refused_total"); v != 1 {
		t.Errorf("fleet_shares_refused_total %v; want 1", v)
	}
}
