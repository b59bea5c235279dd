package govern_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/internal/configfile"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// TestPlanHash: the hash is of the decoded block, so YAML and JSON
// spellings, comments and key order do not change it; an amount does.
func TestPlanHash(t *testing.T) {
	yaml := mustPlan(t, seed004Walk)
	f, err := configfile.Parse("x.json", []byte(`{"governance":{"enabled":true,
		"limits":[
		 {"id":"acme_month","type":"budget_usd","attach":{"level":"org"},"amount_usd":50.0,"period":"month","override":{"allow":true,"max_amount_usd":5e3}},
		 {"id":"ml_daily","attach":{"node":"org:acme/team:ml"},"type":"budget_usd","amount_usd":200,"period":"day"},
		 {"id":"user_rpm","attach":{"level":"user"},"type":"rpm","amount":120,"period":"1m"},
		 {"id":"global_rpm","attach":{"node":"__global"},"type":"rpm","amount":5000,"period":"1m"}],
		"tenants":[{"org":"acme","teams":["ml","search"],"users":{"ml":["dev1","dev2"]}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	json, err := govern.Compile(f.Governance)
	if err != nil {
		t.Fatal(err)
	}
	if yaml.Hash != json.Hash || len(yaml.Hash) != 64 {
		t.Errorf("YAML %s vs JSON %s", yaml.Hash, json.Hash)
	}
	edited := mustPlan(t, tenancy+"  limits:\n    - { id: acme_month, attach: { level: org }, type: budget_usd, amount_usd: 51, period: month }\n")
	if edited.Hash == yaml.Hash {
		t.Error("an edit kept the hash")
	}
}

func TestCompileDefaults(t *testing.T) {
	p := mustPlan(t, seed004Walk)
	l := p.Limit("user_rpm")
	if l.Mode != govern.ModeOn || l.Enforce != govern.EnforceHard || l.Fail != govern.FailOpen || l.Burst != 120 || l.Store != govern.StoreLocal || l.OverrideMax != -1 {
		t.Errorf("user_rpm defaults: %+v", l)
	}
	if m := p.Limit("acme_month"); m.Amount != 50*usd || m.OverrideMax != 5000*usd || !m.OverrideAllow || m.Burst != 0 {
		t.Errorf("acme_month: %+v", m)
	}
	if !p.DiscloseLimits || p.RequireKey || !p.Enabled {
		t.Errorf("switches: %+v", p)
	}
	ids := ""
	for _, l := range p.Limits {
		ids += l.ID + " "
	}
	if ids != "acme_month global_rpm ml_daily user_rpm " {
		t.Errorf("limits not in id order: %s", ids)
	}
	if p.Limit("nope") != nil {
		t.Error("Limit(nope)")
	}

	nilPlan, err := govern.Compile(nil)
	if err != nil || nilPlan.Enabled || nilPlan.Source != nil || !nilPlan.DiscloseLimits || nilPlan.Hash == "" {
		t.Errorf("Compile(nil) = %+v, %v", nilPlan, err)
	}
}

// TestProblemPaths: a boot-time problem keeps its precise path while it
// renders in the seeds' words.
func TestProblemPaths(t *testing.T) {
	f, err := configfile.Parse("x.yaml", []byte(tenancy+"  limits:\n    - { id: team_rpm, attach: { level: team }, type: rpm, amount: 3 }\n    - { id: Bad, attach: { level: team }, type: tpm, amount: 3 }\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = govern.Compile(f.Governance)
	var ps govern.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("%v", err)
	}
	want := []govern.Problem{
		{Path: "governance.limits[0].period", Limit: "team_rpm", Message: "rpm requires a rate-class window period (e.g. 1s, 1m), not a calendar period"},
		{Path: "governance.limits[1].id", Message: `"Bad" is out of charset [a-z0-9_] (lowercase letters, digits and _)`},
		{Path: "governance.limits[1].period", Message: "tpm requires a rate-class window period (e.g. 1s, 1m), not a calendar period"},
		{Path: "governance.limits[1].burst", Message: `tpm limit "Bad": burst 3 is below the reserve cap 16384 — an ordinary max-token reserve could never fit (a permanent 100% refusal); raise burst (default is amount 3) to at least the reserve cap`},
	}
	if len(ps) != len(want) {
		t.Fatalf("problems:\n%v", ps)
	}
	for i := range want {
		if ps[i] != want[i] {
			t.Errorf("problem %d: %+v, want %+v", i, ps[i], want[i])
		}
	}
	if got := ps[2].String(); got != "governance.limits[1].period: tpm requires a rate-class window period (e.g. 1s, 1m), not a calendar period" {
		t.Errorf("a boot problem without a usable id renders %q", got)
	}
	if got := govern.FromConfig(config.Problems{{Path: "a", Message: "b"}}); got.Error() != "a: b" {
		t.Errorf("FromConfig: %q", got.Error())
	}
}

// TestPlanHashPinned pins one plan hash. The hash is the plan version the
// filter and the accountant compare, so its value must not move between
// releases or between the native and the wasm build (this test runs in
// both): a change here is a wire change and makes every filter of the
// previous release report a plan mismatch until it is upgraded.
func TestPlanHashPinned(t *testing.T) {
	const want = "096eadd260549a88ff5d636c702997c5f93ca26ee3691da4a254e79794863a58"
	if got := mustPlan(t, sixLimits).Hash; got != want {
		t.Errorf("hash of seed 002's six limits = %s, want %s", got, want)
	}
}

// TestPlanHashIsMarshal: the canonical encoding under the hash is what
// encoding/json writes for the block, so any native tool can recompute a
// plan's version with json.Marshal.
func TestPlanHashIsMarshal(t *testing.T) {
	files, err := filepath.Glob("testdata/compile/*.golden")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	compiled := 0
	for _, name := range append(files, "") {
		var in string
		if name == "" {
			in = sixLimits
		} else {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			in, _, _ = strings.Cut(string(b), goldenSep)
		}
		f, err := configfile.Parse("fixture.yaml", []byte(in))
		if err != nil {
			continue
		}
		p, err := govern.Compile(f.Governance)
		if err != nil {
			continue
		}
		compiled++
		b, err := json.Marshal(f.Governance)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if want := hex.EncodeToString(sum[:]); p.Hash != want {
			t.Errorf("%s: Hash %s, SHA-256 of json.Marshal %s", name, p.Hash, want)
		}
	}
	if compiled < 5 {
		t.Errorf("only %d fixtures compiled", compiled)
	}
}
