package filter_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

func syncKey(k testKey, revoked bool) syncwire.Key {
	return syncwire.Key{KID: k.kid, SHA256: vkey.Hash(k.key), Owner: k.owner, Revoked: revoked}
}

// onEveryVM sends the request to each worker VM in turn and checks the
// status each answers.
func (r *rig) onEveryVM(q req, status int) {
	r.t.Helper()
	for n := 1; n <= r.h.Workers(); n++ {
		q.vm = n
		resp := r.do(q)
		if resp.Status != status {
			r.t.Fatalf("VM %d: status %d, want %d: %s", n, resp.Status, status, resp.Body)
		}
	}
}

// TestSyncKeys: a key minted after the filter started arrives by sync on
// every VM; its revocation arrives the same way.
func TestSyncKeys(t *testing.T) {
	late := newTestKey("vk_latelatelate", "org:acme/team:search")
	r := accountantRig(t, limTeamRPM)
	q := req{path: "/v1/chat/completions", key: late, body: chatGermany}
	r.onEveryVM(q, 401)
	r.acct.setKeys("k1", syncKey(late, false))
	r.sync()
	r.onEveryVM(q, 200)
	// The static key still works beside the synced one.
	r.onEveryVM(req{path: "/v1/chat/completions", key: dev1Key, body: chatGermany}, 200)
	r.acct.setKeys("k2", syncKey(late, true))
	r.sync()
	r.onEveryVM(q, 401)
	if resp := r.do(q); !strings.Contains(string(resp.Body), "revoked") {
		t.Errorf("revoked key: %s", resp.Body)
	}
	// A key table that no longer lists it: unknown.
	r.acct.setKeys("k3")
	r.sync()
	if resp := r.do(q); resp.Status != 401 || !strings.Contains(string(resp.Body), "unknown virtual key") {
		t.Errorf("dropped key: %d %s", resp.Status, resp.Body)
	}
}

// TestSyncVersions: the filter polls with the versions and cursors it
// holds, one VM per interval; when nothing moved the answer is small and
// no table is rewritten.
func TestSyncVersions(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limOrgBudget), keys: []testKey{dev1Key}, accountant: true, workers: 4,
		acct: func(a *fakeAccountant) {
			a.setKeys("k1", syncKey(dev1Key, false))
			a.setRuntime("r1", nil)
			a.prices = syncwire.Prices{Version: "c1", Models: map[string]syncwire.ModelRates{"gpt-4o-mini": {Input: 150_000, Output: 600_000, Cached: 75_000}}}
			seedSnapshot(a)
		}})
	r.sync()
	tables := tableCAS(r)
	if len(tables) == 0 {
		t.Fatal("no table in shared data")
	}
	before := len(r.acct.pollQueries())
	for i := 0; i < 10; i++ {
		r.step(time.Second)
	}
	polls := r.acct.pollQueries()
	if n := len(polls) - before; n < 9 || n > 11 {
		t.Errorf("%d polls in 10 s from 4 VMs with a 1 s interval, want about 10 (one VM per interval)", n)
	}
	last := polls[len(polls)-1]
	for _, want := range []string{"runtime=fake-rt.1", "snapshot=fake-snap.", "prices=c1", "replica=r-"} {
		if !strings.Contains(last, want) {
			t.Errorf("poll %q does not carry %s", last, want)
		}
	}
	if sizes := r.acct.answerSizes(); sizes[len(sizes)-1] > 400 {
		t.Errorf("an answer with nothing new is %d bytes", sizes[len(sizes)-1])
	}
	if got := tableCAS(r); !maps.Equal(got, tables) {
		t.Errorf("the tables were rewritten although nothing changed")
	}
	// The heartbeat keeps the unchanged snapshot fresh: a minute later the
	// budget is still checked (not suspended) and still refuses.
	mustStatus(t, r.chat(dev1Key, chatGermany), 429)
	for i := 0; i < 60; i++ {
		r.step(time.Second)
	}
	mustStatus(t, r.chat(dev1Key, chatGermany), 429)
}

// tableCAS is the cas of every table bucket in shared data.
func tableCAS(r *rig) map[string]uint32 {
	out := map[string]uint32{}
	for _, k := range r.h.SharedDataKeys() {
		if strings.HasPrefix(k, "tt/t/") {
			_, cas, _ := r.h.SharedData(k)
			out[k] = cas
		}
	}
	return out
}

// TestSyncOverride: a per-node override of a spend limit takes effect at
// the next sync, on every VM, and a removed override reverts.
func TestSyncOverride(t *testing.T) {
	lim := `{"id":"acme_month","attach":{"level":"org"},"type":"budget_usd","amount_usd":0.000001,"period":"month","override":{"allow":true}}`
	r := newRig(t, rigOptions{governance: gov(lim, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true,
		acct: func(a *fakeAccountant) {
			a.setSnapshot("s1", syncwire.Entry{ID: "acme_month|budget_usd|org:acme||month|", PeriodStart: monthStart(), Value: 12_600})
		}})
	r.sync()
	q := req{path: "/v1/chat/completions", key: dev1Key, body: chatGermany}
	r.onEveryVM(q, 429)
	r.acct.setRuntime("r1", nil, syncwire.Override{LimitID: "acme_month", Node: "org:acme", Amount: 1_000_000})
	r.sync()
	r.onEveryVM(q, 200)
	if got := r.meLimit(dev1Key, "acme_month")["limit_usd"].(map[string]any)["usd"]; got != 0.001 {
		t.Errorf("/tt/v1/me limit_usd %v, want the override 0.001", got)
	}
	r.acct.setRuntime("r2", nil)
	r.sync()
	r.onEveryVM(q, 429)
}

// TestSyncSnapshotPeriods: a snapshot entry of an earlier calendar period
// counts as zero; a new snapshot version replaces the counters.
func TestSyncSnapshotPeriods(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limOrgBudget, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true,
		acct: func(a *fakeAccountant) {
			a.setSnapshot("s1", syncwire.Entry{ID: idOrgBudget, PeriodStart: monthStart().AddDate(0, -1, 0), Value: 12_600})
		}})
	r.sync()
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	r.acct.setSnapshot("s2", syncwire.Entry{ID: idOrgBudget, PeriodStart: monthStart(), Value: 999})
	r.sync()
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	r.acct.setSnapshot("s3", syncwire.Entry{ID: idOrgBudget, PeriodStart: monthStart(), Value: 1000})
	r.sync()
	mustStatus(t, r.chat(dev1Key, chatGermany), 429)
}

// TestSyncFailOpenSuspends: without a snapshot (or with a stale one) a
// fail-open spend limit admits, says so in X-Tt-Suspended, and lists the
// limit as suspended on the row.
func TestSyncFailOpenSuspends(t *testing.T) {
	r := orgBudgetRig(t)
	r.acct.set(func(a *fakeAccountant) { a.down = true })
	resp := r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 200)
	// The row left as the request ended, to an accountant that is down: its
	// answer is in before the accountant comes back, so the sync below is
	// what delivers it (under load the failed send could otherwise still be
	// out at that sync's tick, which then sends nothing).
	r.wait()
	if got := resp.Headers.Get("X-Tt-Suspended"); got != "org_monthly_budget" {
		t.Errorf("X-Tt-Suspended %q", got)
	}
	if got := r.meLimit(dev1Key, "org_monthly_budget")["suspended"]; got != true {
		t.Errorf("/tt/v1/me suspended %v", got)
	}
	r.acct.set(func(a *fakeAccountant) { a.down = false })
	seedSnapshot(r.acct)
	r.sync()
	row, ok := r.acct.row(resp.Headers.Get("X-Tt-Request-Id"))
	if !ok || len(row.Suspended) != 1 || row.Suspended[0] != "org_monthly_budget" || row.Decision != ledger.Admitted {
		t.Errorf("row: %+v", row)
	}
	if got := r.metric("tokentriage.suspended"); got != 1 {
		t.Errorf("tokentriage.suspended = %d", got)
	}
	mustStatus(t, r.chat(dev1Key, chatGermany), 429)
}

// TestPlanFromAccountant: with no governance block in the plugin
// configuration the filter admits, unarmed, until the accountant's plan
// arrives; a new plan version replaces it on every VM.
func TestPlanFromAccountant(t *testing.T) {
	r := newRig(t, rigOptions{accountant: true, keys: []testKey{dev1Key}})
	resp := r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 200)
	if got := resp.Headers.Get("X-Tt-Governance"); got != "unarmed" {
		t.Errorf("X-Tt-Governance %q, want unarmed", got)
	}
	mustStatus(t, r.me(dev1Key), 503)
	// An accountant without a governance block: still unarmed, said once,
	// and the VMs settle on that version rather than waiting for a plan.
	r.acct.setPlan("p0", "")
	r.sync()
	r.sync()
	if resp := r.chat(dev1Key, chatGermany); resp.Headers.Get("X-Tt-Governance") != "unarmed" {
		t.Errorf("with an empty plan: %v", resp.Headers)
	}
	said := 0
	for _, l := range r.h.Logs() {
		if strings.Contains(l.Message, "has no governance block") {
			said++
		}
	}
	if said != r.h.Workers() {
		t.Errorf("the missing governance block was logged %d times by %d VMs, want once each", said, r.h.Workers())
	}
	fixed := strings.Replace(limTeamRPM, `"period":"1m"`, `"period":"1m","algorithm":"fixed_window"`, 1)
	r.acct.setPlan("p1", gov(fixed, `,"require_key":true`))
	r.sync()
	for i := 0; i < 3; i++ {
		mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	}
	mustStatus(t, r.chat(dev1Key, chatGermany), 429)
	mustStatus(t, r.chat(testKey{}, chatGermany), 401)
	// A plan whose team_rpm allows 10 in the same fixed window: the counter
	// keeps its 3 arrivals (the identity does not carry the amount), so 7
	// more are admitted.
	r.acct.setPlan("p2", gov(strings.Replace(fixed, `"amount":3`, `"amount":10`, 1), `,"require_key":true`))
	r.sync()
	admitted := 0
	for i := 0; i < 12; i++ {
		if r.chat(dev1Key, chatGermany).Status == 200 {
			admitted++
		}
	}
	if admitted != 7 {
		t.Errorf("%d admitted under the raised plan, want 7", admitted)
	}
	// A plan that does not compile here is logged and the old one kept.
	r.acct.setPlan("p3", `{"enabled":true,"limits":[{"id":"x","attach":{"node":"__global"},"type":"rpm","amount":1,"period":"month"}]}`)
	r.sync()
	logged := false
	for _, l := range r.h.Logs() {
		if strings.Contains(l.Message, "does not compile here") {
			logged = true
		}
	}
	if !logged {
		t.Errorf("a plan that does not compile was not logged")
	}
}

// TestPlanMismatch: an embedded plan that differs from the accountant's is
// counted and logged once.
func TestPlanMismatch(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamRPM), accountant: true,
		acct: func(a *fakeAccountant) { a.setPlan("deadbeefdeadbeef", "") }})
	r.sync()
	r.step(time.Second)
	r.step(time.Second)
	if got := r.metric("tokentriage.sync.plan_mismatch"); got < 1 {
		t.Errorf("tokentriage.sync.plan_mismatch = %d", got)
	}
}

// TestShareDividesByReplicas: store: share divides an rpm amount and a
// concurrency cap by the replica count the accountant reports.
func TestShareDividesByReplicas(t *testing.T) {
	lims := `{"id":"global_rpm","attach":{"node":"__global"},"type":"rpm","amount":10,"period":"1m","store":"share"},
		{"id":"global_conc","attach":{"node":"__global"},"type":"concurrency","amount":5,"store":"share"}`
	r := newRig(t, rigOptions{governance: gov(lims), keys: []testKey{dev1Key}, accountant: true,
		acct: func(a *fakeAccountant) { a.replicas = 4 }})
	r.sync()
	admitted := 0
	for i := 0; i < 10; i++ {
		if r.chat(testKey{}, chatGermany).Status == 200 {
			admitted++
		}
	}
	if admitted != 3 { // ceil(10/4)
		t.Errorf("%d admitted with 4 replicas, want ceil(10/4) = 3", admitted)
	}
	me := r.meLimit(dev1Key, "global_conc")
	if me["amount"] != 2.0 { // ceil(5/4)
		t.Errorf("global_conc amount on /tt/v1/me %v, want ceil(5/4) = 2", me["amount"])
	}
	if me := r.meLimit(dev1Key, "global_rpm"); me["amount"] != 3.0 {
		t.Errorf("global_rpm amount on /tt/v1/me %v, want 3", me["amount"])
	}
}

// TestUnarmedBodyUntouched: before any plan is in force nothing is
// governed, so the body reaches the provider as the client sent it: no
// output maximum is set (a reserve never ran to lower one).
func TestUnarmedBodyUntouched(t *testing.T) {
	r := newRig(t, rigOptions{accountant: true, keys: []testKey{dev1Key}})
	body := chatBody("gpt-4o-mini", "hi")
	resp := r.chat(dev1Key, body)
	mustStatus(t, resp, 200)
	if got := resp.Headers.Get("X-Tt-Governance"); got != "unarmed" {
		t.Fatalf("X-Tt-Governance %q, want unarmed", got)
	}
	rec, _ := r.stub.Last()
	if strings.Contains(string(rec.Body), "max_completion_tokens") || strings.Contains(string(rec.Body), "max_tokens") {
		t.Errorf("an unarmed request reached the provider with an output maximum: %s", rec.Body)
	}
}

// TestPlanProviderNotGiven: a synced plan whose limit matches a provider
// this filter never names a request (no providers rule gives it, and it
// is not openai or anthropic) is armed, and each VM says the limit will
// never count, naming the names it gives.
func TestPlanProviderNotGiven(t *testing.T) {
	r := newRig(t, rigOptions{accountant: true, keys: []testKey{dev1Key}})
	r.acct.setPlan("p1", `{"enabled":true,"limits":[`+
		`{"id":"az_tpm","attach":{"node":"__global"},"type":"tpm","amount":20000,"period":"1m","match":{"provider":"azure"}},`+
		`{"id":"oa_tpm","attach":{"node":"__global"},"type":"tpm","amount":20000,"period":"1m","match":{"provider":"openai"}}]}`)
	r.sync()
	// A VM whose tick ran before the poll's answer was written reads the
	// plan at its next tick.
	r.step(time.Second)
	want := `sync: limit az_tpm of the accountant's plan: match.provider "azure" never matches: no providers rule names it and the filter does not infer it (the provider names a request can be given here: anthropic, openai)`
	said, other := 0, 0
	for _, l := range r.h.Logs() {
		if strings.Contains(l.Message, want) {
			said++
		} else if strings.Contains(l.Message, "oa_tpm") {
			other++
		}
	}
	if said != r.h.Workers() || other != 0 {
		t.Errorf("the unmatched provider was logged %d times by %d VMs (and oa_tpm %d times), want once each", said, r.h.Workers(), other)
	}
	r.sync()
	again := 0
	for _, l := range r.h.Logs() {
		if strings.Contains(l.Message, want) {
			again++
		}
	}
	if again != said {
		t.Errorf("logged again at a sync with the same plan: %d, then %d", said, again)
	}
}

// TestSyncKeyExpiryAndRotation: a synced key past its expires_at is a 401
// naming the expiry and what to do, on every VM and at /tt/v1/me; a
// rotated key authenticates with its new secret, and with its previous
// one only until prev_until; /tt/v1/me shows the key's name and expiry.
func TestSyncKeyExpiryAndRotation(t *testing.T) {
	k := newTestKey("vk_rotaterotate", "org:acme/team:ml/user:dev1")
	lim := `{"id":"team_rpm","attach":{"level":"team"},"type":"rpm","amount":1000,"period":"1m"}`
	r := newRig(t, rigOptions{governance: gov(lim, `,"require_key":true`), accountant: true})
	now := r.clock.Now()
	expires := now.Add(90 * time.Second).Truncate(time.Second)
	sk := syncKey(k, false)
	sk.Name, sk.ExpiresAt = "ci-bot", expires.Unix()
	r.acct.setKeys("k1", sk)
	r.sync()
	q := req{path: "/v1/chat/completions", key: k, body: chatGermany}
	r.onEveryVM(q, 200)
	me := r.me(k)
	if !strings.Contains(string(me.Body), `"name": "ci-bot"`) || !strings.Contains(string(me.Body), `"expires_at": "`+expires.UTC().Format(time.RFC3339)+`"`) {
		t.Errorf("/tt/v1/me of a named key with an expiry:\n%s", me.Body)
	}

	// Rotation: a new secret under the same kid; the old one is accepted
	// for 30 s more.
	rotated := k
	rotated.key = "tt-" + k.kid + "-" + "NEWsecretNEWsecretNEWsecretNEW12"
	sk2 := sk
	sk2.SHA256, sk2.PrevSHA256, sk2.PrevUntil = vkey.Hash(rotated.key), sk.SHA256, r.clock.Now().Add(30*time.Second).Unix()
	r.acct.setKeys("k2", sk2)
	r.sync()
	r.onEveryVM(req{path: "/v1/chat/completions", key: rotated, body: chatGermany}, 200)
	r.onEveryVM(q, 200) // the previous secret, within its grace period
	for r.clock.Now().Unix() < sk2.PrevUntil {
		r.step(5 * time.Second)
	}
	r.onEveryVM(q, 401)
	if resp := r.do(q); !strings.Contains(string(resp.Body), "unknown virtual key "+k.kid) {
		t.Errorf("the previous secret after its grace period: %s", resp.Body)
	}
	r.onEveryVM(req{path: "/v1/chat/completions", key: rotated, body: chatGermany}, 200)

	// Expiry: refused with both secrets, the message naming when.
	for !r.clock.Now().After(expires) {
		r.step(5 * time.Second)
	}
	rq := req{path: "/v1/chat/completions", key: rotated, body: chatGermany}
	r.onEveryVM(rq, 401)
	want := "virtual key " + k.kid + " expired at " + expires.UTC().Format(time.RFC3339) + "; rotate it"
	if resp := r.do(rq); !strings.Contains(string(resp.Body), want) {
		t.Errorf("expired key: %s\nwant it to contain %q", resp.Body, want)
	}
	if resp := r.me(rotated); resp.Status != 401 || !strings.Contains(string(resp.Body), want) {
		t.Errorf("/tt/v1/me of an expired key: %d %s", resp.Status, resp.Body)
	}
	// A wrong secret learns nothing of the expiry.
	wrong := k
	wrong.key = "tt-" + k.kid + "-" + "WRONGsecretWRONGsecretWRONGsecre"
	if resp := r.do(req{path: "/v1/chat/completions", key: wrong, body: chatGermany}); !strings.Contains(string(resp.Body), "unknown virtual key") {
		t.Errorf("a wrong secret of an expired key: %s", resp.Body)
	}
}
