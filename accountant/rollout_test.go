package accountant

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/api"
)

// poller is a filter replica as the sync wire sees it: it polls with the
// versions it holds and takes up what the answer carries, as filter/sync.go
// does.
type poller struct {
	id                      string
	plan, runtime, snapshot string
}

// poll asks for what changed and loads the answer.
func (p *poller) poll(t *testing.T, f *fixture) {
	t.Helper()
	s := f.sync(t, fmt.Sprintf("replica=%s&plan=%s&runtime=%s&snapshot=%s", p.id, p.plan, p.runtime, p.snapshot))
	p.plan, p.runtime, p.snapshot = s.Plan.Version, s.Runtime.Cursor, s.Snapshot.Cursor
}

// report polls with the versions held and does not load the answer: a
// replica whose poll answer has not reached it yet.
func (p *poller) report(t *testing.T, f *fixture) {
	t.Helper()
	f.sync(t, fmt.Sprintf("replica=%s&plan=%s&runtime=%s&snapshot=%s", p.id, p.plan, p.runtime, p.snapshot))
}

func (f *fixture) overrideState(t *testing.T) string { return f.adminGet(t, "overrides") }

func (f *fixture) limits(t *testing.T) string { return f.adminGet(t, "governance/limits") }

// adminGet is the body of GET path under the management API, which must
// answer 200.
func (f *fixture) adminGet(t *testing.T, path string) string {
	t.Helper()
	code, body := f.admin(t, http.MethodGet, api.Prefix+path, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	return body
}

// steadyLimits is the governance/limits document as it reads with every
// armed override in force.
func (f *fixture) steadyLimits(t *testing.T) string {
	t.Helper()
	ovs, err := f.s.db.Overrides("")
	if err != nil {
		t.Fatal(err)
	}
	return string(api.LimitsDocument(f.s.Armed(), ovs).AppendJSON(nil))
}

func wantState(t *testing.T, what, body, state, reason string) {
	t.Helper()
	want := `"state":"` + state + `"`
	if reason != "" {
		want += `,"reason":"` + reason + `"`
	}
	if !strings.Contains(body, want+"}") {
		t.Errorf("%s:\n%s\nwant %s", what, body, want)
	}
}

const (
	noneSynced = "the accountant has armed it, and no gateway has synced since: no filter replica polled within the last 30s, so no gateway enforces it; each filter enforces it from its next sync"
	othersNext = "and one that does not yet enforces it from its next sync (sync_interval, 1s by default) and checks traffic against the amount it held before until then"
)

// TestOverrideInForceOnceEveryReplicaHoldsIt lowers a cap through the API
// while two filter replicas poll: the override reads as armed, with how
// many replicas hold it, until both report holding the runtime plane that
// carries it, and then as in force, with the governance/limits document
// byte-identical to the steady state's.
func TestOverrideInForceOnceEveryReplicaHoldsIt(t *testing.T) {
	f := newFixture(t, overrideConfig)
	a, b := &poller{id: "a"}, &poller{id: "b"}
	for _, p := range []*poller{a, b} {
		p.poll(t, f)
		p.poll(t, f)
	}

	code, body := f.admin(t, http.MethodPut, api.Prefix+"overrides", `{"limit_id":"team_budget","node":"org:acme/team:ml","amount_usd":2}`)
	if code != http.StatusOK {
		t.Fatalf("PUT override: %d %s", code, body)
	}
	golden(t, "override_put_rollout.golden", []byte(body))
	golden(t, "override_list_rollout.golden", []byte(f.overrideState(t)))
	golden(t, "limits_rollout.golden", []byte(f.limits(t)))

	// a's poll carries the new runtime plane; it holds it from its next
	// poll on.
	a.poll(t, f)
	wantState(t, "a served, not yet reporting", f.overrideState(t), "armed", "the accountant has armed it; 0 of 2 live gateway replicas hold it, "+othersNext)
	a.poll(t, f)
	wantState(t, "a holding", f.overrideState(t), "armed", "the accountant has armed it; 1 of 2 live gateway replicas hold it, "+othersNext)
	b.poll(t, f)
	b.poll(t, f)
	wantState(t, "both holding", f.overrideState(t), "in_force", "")
	if got, want := f.limits(t), f.steadyLimits(t); got != want {
		t.Errorf("limits with the override in force:\n%s\nwant the steady document\n%s", got, want)
	}
	if !strings.Contains(f.limits(t), `"overrides": [
    {"limit_id":"team_budget","limit_type":"budget_usd","node":"org:acme/team:ml","amount":{"usd":2,`) {
		t.Errorf("the override in force is not listed:\n%s", f.limits(t))
	}

	// A later runtime write that leaves the override alone (a node)
	// does not make it armed again, and replicas holding the newer plane
	// hold it too.
	code, body = f.admin(t, http.MethodPost, api.Prefix+"nodes", `{"id":"org:acme/team:ai"}`)
	if code/100 != 2 {
		t.Fatalf("create node: %d %s", code, body)
	}
	wantState(t, "after an unrelated write", f.overrideState(t), "in_force", "")
	a.poll(t, f)
	a.poll(t, f)
	wantState(t, "a on the newer plane", f.overrideState(t), "in_force", "")

	// Re-putting the same amount is in force at once: every replica
	// enforces that amount already.
	code, body = f.admin(t, http.MethodPut, api.Prefix+"overrides", `{"limit_id":"team_budget","node":"org:acme/team:ml","amount_usd":2}`)
	if code != http.StatusOK || !strings.Contains(body, `"state":"in_force"`) {
		t.Errorf("PUT the same amount: %d %s", code, body)
	}

	// Lowering it again: armed until both hold the new amount. b stops
	// polling; once it is past the liveness window a alone counts.
	f.admin(t, http.MethodPut, api.Prefix+"overrides", `{"limit_id":"team_budget","node":"org:acme/team:ml","amount_usd":1.5}`)
	wantState(t, "lowered again", f.overrideState(t), "armed", "the accountant has armed it; 0 of 2 live gateway replicas hold it, "+othersNext)
	f.clock.Set(t0.Add(LivenessWindow / 2))
	a.poll(t, f)
	a.poll(t, f)
	wantState(t, "b quiet, still live", f.overrideState(t), "armed", "the accountant has armed it; 1 of 2 live gateway replicas hold it, "+othersNext)
	f.clock.Set(t0.Add(LivenessWindow + time.Second))
	a.poll(t, f)
	wantState(t, "b past the window", f.overrideState(t), "in_force", "")

	// No replica live: nothing enforces it.
	f.clock.Set(t0.Add(3 * LivenessWindow))
	wantState(t, "no replica live", f.overrideState(t), "armed", noneSynced)
	if got := f.limits(t); !strings.Contains(got, `"overrides": [],`) || !strings.Contains(got, "team_budget @ org:acme/team:ml amount $1.5 is armed ("+noneSynced+")") {
		t.Errorf("limits with no replica live:\n%s", got)
	}
}

// TestOverrideRolloutWithoutGateway: with no filter replica polling, a
// written override is armed, not in force, and a replica that then polls
// with an old plane does not count as holding it.
func TestOverrideRolloutWithoutGateway(t *testing.T) {
	f := newFixture(t, overrideConfig)
	code, body := f.admin(t, http.MethodPut, api.Prefix+"overrides", `{"limit_id":"team_budget","node":"org:acme/team:ml","amount_usd":2}`)
	if code != http.StatusOK {
		t.Fatalf("PUT override: %d %s", code, body)
	}
	wantState(t, "PUT with no gateway", body, "armed", noneSynced)
	wantState(t, "GET with no gateway", f.overrideState(t), "armed", noneSynced)

	// A replica that reports no versions, or versions of another
	// database, holds nothing.
	f.sync(t, "replica=x")
	wantState(t, "a first poll", f.overrideState(t), "armed", "the accountant has armed it; 0 of 1 live gateway replicas hold it, "+othersNext)
	f.sync(t, "replica=x&runtime=0123456789ab.99&plan="+f.s.planHash())
	wantState(t, "another database's version", f.overrideState(t), "armed", "the accountant has armed it; 0 of 1 live gateway replicas hold it, "+othersNext)
	x := &poller{id: "x"}
	x.poll(t, f)
	x.report(t, f)
	wantState(t, "x holding", f.overrideState(t), "in_force", "")

	// After a restart the override is armed at the restart's point: a
	// replica still holding the same plane holds it.
	f.restart(t)
	wantState(t, "after a restart, before a poll", f.overrideState(t), "armed", noneSynced)
	x.report(t, f)
	wantState(t, "after a restart", f.overrideState(t), "in_force", "")
}

// TestOverrideArmedByReloadNeedsThePlan: an override the config dropped
// and a reload arms again (its runtime plane unchanged) is in force only
// once the replicas report holding the reloaded plan.
func TestOverrideArmedByReloadNeedsThePlan(t *testing.T) {
	f := newFixture(t, overrideConfig)
	code, body := f.admin(t, http.MethodPut, api.Prefix+"overrides", `{"limit_id":"team_budget","node":"org:acme/team:ml","amount_usd":4}`)
	if code != http.StatusOK {
		t.Fatalf("PUT override: %d %s", code, body)
	}
	a := &poller{id: "a"}
	a.poll(t, f)
	a.poll(t, f)
	wantState(t, "held", f.overrideState(t), "in_force", "")

	lower := strings.Replace(overrideConfig, "max_amount_usd: 5", "max_amount_usd: 3", 1)
	f.setConfig(t, lower)
	if err := f.s.Reload(); err != nil {
		t.Fatal(err)
	}
	wantState(t, "ceiling lowered", f.overrideState(t), "dropped", `override amount $4 of limit \"team_budget\" exceeds its ceiling $3 (override.max_amount_usd); raise the ceiling in the config first`)
	a.poll(t, f)
	a.poll(t, f)

	// A reload to another config that holds the override again: a
	// still holds the plan with the lower ceiling.
	higher := strings.Replace(overrideConfig, "max_amount_usd: 5", "max_amount_usd: 6", 1)
	f.setConfig(t, higher)
	if err := f.s.Reload(); err != nil {
		t.Fatal(err)
	}
	wantState(t, "re-armed by a reload", f.overrideState(t), "armed", "the accountant has armed it; 0 of 1 live gateway replicas hold it, "+othersNext)
	a.poll(t, f)
	a.poll(t, f)
	wantState(t, "a holding the reloaded plan", f.overrideState(t), "in_force", "")

	// A reload that leaves the override as it was keeps it in force.
	f.setConfig(t, strings.Replace(higher, "thresholds: [0.5]", "thresholds: [0.6]", 1))
	if err := f.s.Reload(); err != nil {
		t.Fatal(err)
	}
	if h := f.s.planHash(); h == a.plan {
		t.Fatal("the reload did not change the plan")
	}
	wantState(t, "an unrelated reload", f.overrideState(t), "in_force", "")
}
