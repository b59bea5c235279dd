package wire

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// checkGolden compares got with testdata/<name>.golden.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", name+".golden"), []byte(got), *update)
}

// response renders a response the way curl -i prints it.
func response(status int, headers [][2]string, body []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\n", status, http.StatusText(status))
	for _, h := range headers {
		fmt.Fprintf(&b, "%s: %s\n", h[0], h[1])
	}
	b.WriteString("\n")
	b.Write(body)
	return b.String()
}

func refusalResponse(r *Refusal) string {
	return response(r.Status(), r.Headers(), r.AppendBody(nil))
}

// sdkHeaders are the headers this project adds to the seeds' set of a
// refusal, for the official SDKs.
var sdkHeaders = map[string]bool{HeaderRetryAfterMs: true, HeaderShouldRetry: true, HeaderXRequestID: true, HeaderSDKRequestID: true}

// seedResponse renders a refusal with the seeds' headers only: the headers
// added for the SDKs follow the seeds' in order, so what is left must be
// the seed's capture byte for byte.
func seedResponse(r *Refusal) string {
	var hs [][2]string
	for _, h := range r.Headers() {
		if !sdkHeaders[h[0]] {
			hs = append(hs, h)
		}
	}
	return response(r.Status(), hs, r.AppendBody(nil))
}

func rejectionResponse(r *Rejection) string {
	return response(r.Status, r.Headers(), r.AppendBody(nil))
}

// The instant of the seed 000 budget capture.
var captured = time.Date(2026, 8, 9, 20, 44, 50, 0, time.UTC)

func budgetRefusal() Refusal {
	return Refusal{
		RequestID:  "tt_i3f2naenug5aanctu6pcjrofcy",
		LimitID:    "org_monthly_budget",
		LimitType:  BudgetUSD,
		Node:       "org:acme",
		Period:     "month",
		ResetsAt:   time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC),
		RetryAfter: Seconds(time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC).Sub(captured)),
		Observed:   12600, // nanodollars
		Limit:      1000,
	}
}

func rpmRefusal() Refusal {
	return Refusal{RequestID: "tt_e6gbpncee32dbu7y5jpsfr4ax4", LimitID: "team_rpm", LimitType: RPM,
		Node: "org:acme/team:ml", Period: time.Minute.String(), RetryAfter: Seconds(20 * time.Second)}
}

func tpmRefusal() Refusal {
	return Refusal{LimitID: "team_tpm", LimitType: TPM, Node: "org:acme/team:ml",
		Period: time.Minute.String(), RetryAfter: Seconds(38346 * time.Millisecond)}
}

func concurrencyRefusal(observed int64) Refusal {
	return Refusal{RequestID: "tt_tbuhetygwddxiaprkw3j3fkwze", LimitID: "user_concurrency", LimitType: Concurrency,
		Node: "org:acme/team:ml/user:dev1", Observed: observed, Limit: 2}
}

func TestSeedRefusals(t *testing.T) {
	budget, rpm, tpm := budgetRefusal(), rpmRefusal(), tpmRefusal()
	for _, c := range []struct {
		name string
		got  string
		want string
	}{
		{"budget 429", seedResponse(&budget), seedBudget429},
		{"rpm 429", seedResponse(&rpm), seedRPM429},
		{"tpm 429", seedResponse(&tpm), seedTPM429},
	} {
		if c.got != c.want {
			t.Errorf("%s:\n got: %s\nwant: %s", c.name, c.got, c.want)
		}
	}
	body := string(budget.AppendBody(nil))
	if !strings.Contains(body, `"refused_by":`+seedBudgetRefusedBy+`,`) {
		t.Errorf("budget body lacks seed 002's refused_by block: %s", body)
	}
	c := concurrencyRefusal(0)
	if got := string(c.AppendBody(nil)); got != seedConcurrencyBody {
		t.Errorf("concurrency body:\n got: %s\nwant: %s", got, seedConcurrencyBody)
	}
}

func TestRefusalGoldens(t *testing.T) {
	budget, rpm, tpm, conc := budgetRefusal(), rpmRefusal(), tpmRefusal(), concurrencyRefusal(2)
	tpm.RequestID = "tt_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	lagging := budgetRefusal()
	lagging.Bound = Bound{TeeLagRows: 37, DroppedRows: 2}
	tokens := Refusal{RequestID: "tt_baaaaaaaaaaaaaaaaaaaaaaaaa", LimitID: "team_monthly_tokens", LimitType: QuotaTokens,
		Node: "org:acme/team:ml", Period: "month", ResetsAt: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC),
		RetryAfter: 1912510, Observed: 50000060, Limit: 50000000}
	requests := Refusal{RequestID: "tt_caaaaaaaaaaaaaaaaaaaaaaaaa", LimitID: "team_daily_requests", LimitType: QuotaRequests,
		Node: "org:acme/team:ml", Period: "day", ResetsAt: time.Date(2026, 8, 10, 0, 0, 0, 0, time.UTC),
		RetryAfter: 11710, Observed: 20000, Limit: 20000}
	unfit := Refusal{RequestID: "tt_daaaaaaaaaaaaaaaaaaaaaaaaa", LimitID: "team_tpm", LimitType: TPM, Node: "org:acme/team:ml",
		Period: "1m0s", Unfittable: true, Cost: 41384, Burst: 20000}
	// A budget in reserve mode, alone and in a fleet of three; an rpm
	// refusal that knows its wait to the nanosecond (Retry-After-Ms); a
	// quota whose day ends within the minute, so a retry can succeed.
	reserve := budgetRefusal()
	reserve.Reserve, reserve.Replicas = true, 1
	reserveFleet := reserve
	reserveFleet.Replicas = 3
	reserveHeld := reserveFleet
	reserveHeld.Held = true
	// The budget not spent: calls in flight hold what is left of it, and
	// the call would fit without them (no reset time, no retry).
	reserveInFlight := reserveHeld
	reserveInFlight.Observed, reserveInFlight.Limit, reserveInFlight.InFlight = 1000000, 1000000, 880000
	rpmExact := rpmRefusal()
	rpmExact.Wait = 19*time.Second + 250*time.Millisecond + 1
	dayEnd := requests
	dayEnd.RetryAfter, dayEnd.Wait = 42, 41500*time.Millisecond
	refusals := map[string]*Refusal{
		"refusal_budget_usd":               &budget,
		"refusal_budget_lagging":           &lagging,
		"refusal_budget_reserve":           &reserve,
		"refusal_budget_reserve_fleet":     &reserveFleet,
		"refusal_budget_reserve_held":      &reserveHeld,
		"refusal_budget_reserve_in_flight": &reserveInFlight,
		"refusal_quota_tokens":             &tokens,
		"refusal_quota_requests":           &requests,
		"refusal_quota_day_end":            &dayEnd,
		"refusal_rpm":                      &rpm,
		"refusal_rpm_exact":                &rpmExact,
		"refusal_tpm":                      &tpm,
		"refusal_concurrency":              &conc,
		"refusal_unfittable":               &unfit,
	}
	for name, r := range refusals {
		got := refusalResponse(r)
		checkGolden(t, name, got)
		checkJSON(t, name, r.AppendBody(nil))
	}
	// Every refusal in the two provider shapes: Anthropic's envelope on
	// Anthropic endpoints, OpenAI's code and param when asked for.
	for name, r := range refusals {
		for shape, suffix := range map[Shape]string{ShapeAnthropic: "_anthropic", ShapeOpenAI: "_openai"} {
			c := *r
			c.Shape = shape
			checkGolden(t, name+suffix, refusalResponse(&c))
			checkJSON(t, name+suffix, c.AppendBody(nil))
		}
	}
}

// TestRetryVerdicts pins which refusals the SDKs retry: a wait shorter than
// MaxRetryWait, and nothing that no wait can clear.
func TestRetryVerdicts(t *testing.T) {
	for i, c := range []struct {
		r    Refusal
		want bool
	}{
		{Refusal{LimitType: RPM, RetryAfter: 20}, true},
		{Refusal{LimitType: RPM, RetryAfter: 59}, true},
		{Refusal{LimitType: RPM, RetryAfter: 60}, false},
		{Refusal{LimitType: RPM, RetryAfter: 60, Wait: 60*time.Second - 1}, true},
		{Refusal{LimitType: RPM, RetryAfter: 60, Wait: 60 * time.Second}, false},
		{Refusal{LimitType: TPM, RetryAfter: 39}, true},
		{Refusal{LimitType: TPM, Unfittable: true}, false},
		{Refusal{LimitType: Concurrency}, false},
		{Refusal{LimitType: BudgetUSD, RetryAfter: 1912510}, false},
		{Refusal{LimitType: BudgetUSD, RetryAfter: 30}, true},
		{Refusal{LimitType: BudgetUSD, RetryAfter: 30, Reserve: true, InFlight: 1}, false},
		{Refusal{LimitType: QuotaRequests, RetryAfter: 11710}, false},
		{Refusal{LimitType: QuotaTokens, RetryAfter: 86400}, false},
	} {
		if got := c.r.ShouldRetry(); got != c.want {
			t.Errorf("step %d: %+v: ShouldRetry %v, want %v", i, c.r, got, c.want)
		}
		var retry string
		for _, h := range c.r.Headers() {
			if h[0] == HeaderShouldRetry {
				retry = h[1]
			}
		}
		if want := map[bool]string{true: "true", false: "false"}[c.want]; retry != want {
			t.Errorf("step %d: X-Should-Retry %q, want %q", i, retry, want)
		}
	}
	for _, status := range []int{400, 401, 403, 404, 405, 413, 415} {
		if r := (Rejection{Status: status}); r.ShouldRetry() {
			t.Errorf("a %d rejection says retry", status)
		}
	}
	if r := (Rejection{Status: 503}); !r.ShouldRetry() {
		t.Error("a 503 rejection says do not retry")
	}
}

func TestRejectionGoldens(t *testing.T) {
	id := "tt_eaaaaaaaaaaaaaaaaaaaaaaaaa"
	cases := map[string]Rejection{
		"reject_missing_key":       MissingKey(id),
		"reject_malformed_key":     MalformedKey(id, CredentialAuthorization),
		"reject_malformed_api_key": MalformedKey(id, CredentialAPIKey),
		"reject_foreign_key":       ForeignKey(id, CredentialAuthorization),
		"reject_foreign_api_key":   ForeignKey(id, CredentialAPIKey),
		"reject_unknown_key":       UnknownKey(id, "vk_FEKZdMs2UQRi"),
		"reject_revoked_key":       RevokedKey(id, "vk_FEKZdMs2UQRi"),
		"reject_scope_models":      ScopeDenied(id, "vk_FEKZdMs2UQRi", ScopeModels, "gpt-4o", []string{"gpt-4o-mini", "o3*"}),
		"reject_scope_providers":   ScopeDenied(id, "vk_FEKZdMs2UQRi", ScopeProviders, "anthropic", []string{"openai"}),
		"reject_scope_endpoints":   ScopeDenied(id, "vk_FEKZdMs2UQRi", ScopeEndpoints, "/v1/embeddings", []string{"/v1/chat/completions"}),
		"reject_scope_passthrough": ScopeDenied(id, "vk_FEKZdMs2UQRi", ScopeAllowPassthrough, "/v1/models", nil),
		"reject_bad_body":          BadBody(id, "/v1/chat/completions", "not valid JSON (unexpected end of input at byte 41)"),
		"reject_too_large":         TooLarge(id, 1<<20),
		"reject_no_snapshot":       Uncheckable(id, "org_monthly_budget", BudgetUSD, "org:acme", NoSnapshot),
		"reject_stale_snapshot":    Uncheckable(id, "org_monthly_budget", BudgetUSD, "org:acme", StaleSnapshot(42*time.Second+300*time.Millisecond, 30*time.Second)),
		"reject_not_found":         NotFound(id, "/tt/v1/you"),
		"reject_model_not_found":   ModelNotFound(id, "vk_FEKZdMs2UQRi", "gpt-4.1", ScopeModels, "gpt-4.1", []string{"gpt-4o*"}),
		"reject_model_provider":    ModelNotFound(id, "vk_FEKZdMs2UQRi", "claude-3-5-haiku-latest", ScopeProviders, "anthropic", []string{"openai"}),
		"reject_method":            MethodNotAllowed(id, "POST", "/tt/v1/me", "GET"),
	}
	cases["reject_encoded"] = EncodedBody(id, "/v1/messages", "gzip")
	for name, r := range cases {
		checkGolden(t, name, rejectionResponse(&r))
		checkJSON(t, name, r.AppendBody(nil))
		for shape, suffix := range map[Shape]string{ShapeAnthropic: "_anthropic", ShapeOpenAI: "_openai"} {
			c := r
			c.Shape = shape
			checkGolden(t, name+suffix, rejectionResponse(&c))
			checkJSON(t, name+suffix, c.AppendBody(nil))
		}
	}
}

func TestSeedDisclosures(t *testing.T) {
	headers := func(d Disclosure) string {
		var b strings.Builder
		for _, h := range d.AppendHeaders(nil) {
			fmt.Fprintf(&b, "%s: %s\n", h[0], h[1])
		}
		return b.String()
	}
	rpm := Policy{LimitID: "team_rpm", Quota: 300, Window: time.Minute, Remaining: 59}
	tpm := Policy{LimitID: "team_tpm", Quota: 20000, Window: time.Minute, Remaining: 3609}
	if got := headers(Disclosure{Requests: rpm}); got != seedRPMServed {
		t.Errorf("rpm disclosure:\n got: %s\nwant: %s", got, seedRPMServed)
	}
	if got := headers(Disclosure{Tokens: tpm}); got != seedTPMServed {
		t.Errorf("tpm disclosure:\n got: %s\nwant: %s", got, seedTPMServed)
	}
	checkGolden(t, "disclosure_both", headers(Disclosure{Requests: rpm, Tokens: tpm}))
	if got := (&Disclosure{}).AppendHeaders(nil); len(got) != 0 {
		t.Errorf("empty disclosure wrote %v", got)
	}
	sub := Policy{LimitID: "burst_rps", Quota: 5, Window: 1500 * time.Millisecond, Remaining: 4}
	if got := headers(Disclosure{Requests: sub}); !strings.HasPrefix(got, "Ratelimit-Policy: \"burst_rps\";q=5;w=2\n") {
		t.Errorf("a 1.5 s window should disclose w=2: %s", got)
	}
}

var onHardOpen = Posture{Mode: "on", Enforce: "hard", Fail: "open"}

func seedMeDoc() Me {
	return Me{
		KID:   "vk_FEKZdMs2UQRi",
		Node:  "org:acme/team:ml/user:dev1",
		Chain: []string{"org:acme/team:ml/user:dev1/key:vk_FEKZdMs2UQRi", "org:acme/team:ml/user:dev1", "org:acme/team:ml", "org:acme", "__global"},
		Limits: []MeLimit{
			{LimitID: "org_monthly_budget", Type: BudgetUSD, Node: "org:acme", Period: "month",
				ResetsAt: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC), Posture: onHardOpen,
				LimitUSD: USD{Nanos: 1000}, ObservedUSD: USD{Nanos: 12600, Estimated: true}, RemainingUSD: USD{Estimated: true}},
			{LimitID: "user_concurrency", Type: Concurrency, Node: "org:acme/team:ml/user:dev1", Posture: onHardOpen,
				Amount: 10, Remaining: 10},
			{LimitID: "team_rpm", Type: RPM, Node: "org:acme/team:ml", Period: "1m0s", Posture: onHardOpen,
				Amount: 3, Observed: 2, Remaining: 1, ResetsAt: captured.Add(40 * time.Second)},
			{LimitID: "team_tpm", Type: TPM, Node: "org:acme/team:ml", Period: "1m0s", Posture: onHardOpen,
				Amount: 20000, Remaining: 20000, ResetsAt: captured},
		},
	}
}

// rateTimes are the members this project adds to seed 004's rpm and tpm
// rows: when the window is full again, and when the next unit frees.
var rateTimes = regexp.MustCompile(`,"resets_at":"[^"]*"(.*),"retry_after_s":[0-9]+`)

// seedRows removes rateTimes from the rpm and tpm rows of a /tt/v1/me
// document, leaving what seed 004 printed.
func seedRows(doc string) string {
	lines := strings.Split(doc, "\n")
	for i, l := range lines {
		if strings.Contains(l, `"type":"rpm"`) || strings.Contains(l, `"type":"tpm"`) {
			lines[i] = rateTimes.ReplaceAllString(l, "$1")
		}
	}
	return strings.Join(lines, "\n")
}

func TestSeedMe(t *testing.T) {
	me := seedMeDoc()
	got := string(me.AppendJSON(nil))
	if !strings.Contains(got, `"period":"1m0s","resets_at":"2026-08-09T20:45:30Z",`) || !strings.Contains(got, `"remaining":1,"retry_after_s":0}`) {
		t.Errorf("the rpm row lacks resets_at or retry_after_s: %s", got)
	}
	got = seedRows(got)
	if got != seedMe {
		t.Errorf("/tt/v1/me:\n got: %s\nwant: %s", got, seedMe)
	}
	if got := string(me.Limits[0].appendJSON(nil)); got != seedMeBudgetRow {
		t.Errorf("budget row:\n got: %s\nwant: %s", got, seedMeBudgetRow)
	}
	if got := string(me.Limits[1].appendJSON(nil)); got != seedMeConcurrencyRow {
		t.Errorf("concurrency row:\n got: %s\nwant: %s", got, seedMeConcurrencyRow)
	}
	checkJSON(t, "me", []byte(got))
}

func TestMeGoldens(t *testing.T) {
	anon := Me{Chain: []string{"__global"}, Limits: []MeLimit{{LimitID: "global_rpm", Type: RPM, Node: "__global",
		Period: "1m0s", Posture: Posture{Mode: "shadow", Enforce: "hard", Fail: "open"}, Amount: 5000, Observed: 12, Remaining: 4988,
		ResetsAt: captured.Add(time.Second)}, {LimitID: "global_tpm", Type: TPM, Node: "__global", Period: "1m0s", Posture: onHardOpen,
		Amount: 20000, Observed: 20000, RetryAfter: 3, ResetsAt: captured.Add(time.Minute)}}}
	scoped := Me{KID: "vk_FEKZdMs2UQRi", Node: "org:acme/team:ml", Chain: []string{"org:acme/team:ml/key:vk_FEKZdMs2UQRi", "org:acme/team:ml", "org:acme", "__global"},
		Scopes: Scopes{Models: []string{"gpt-4o-mini", "o3*"}, Providers: []string{}, Endpoints: []string{"/v1/chat/completions"}, AllowPassthrough: true},
		Limits: []MeLimit{
			{LimitID: "team_monthly_tokens", Type: QuotaTokens, Node: "org:acme/team:ml", Period: "month",
				ResetsAt: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC), Suspended: true,
				Posture: Posture{Mode: "on", Enforce: "soft", Fail: "closed"}, Amount: 50000000, Observed: 60, Remaining: 49999940},
			{LimitID: "ml_daily", Type: BudgetUSD, Node: "org:acme/team:ml", Period: "day",
				ResetsAt: time.Date(2026, 8, 10, 0, 0, 0, 0, time.UTC), Posture: onHardOpen,
				LimitUSD: USD{Nanos: 200 * NanosPerUSD}, ObservedUSD: USD{Nanos: 12_345_678_901, Unpriced: true}, RemainingUSD: USD{Nanos: 187_654_321_099, Unpriced: true}},
		}}
	empty := Me{KID: "vk_FEKZdMs2UQRi", Node: "org:acme"}
	for name, m := range map[string]Me{"me_seed": seedMeDoc(), "me_anonymous": anon, "me_scoped": scoped, "me_empty": empty} {
		got := m.AppendJSON(nil)
		checkGolden(t, name, string(got))
		checkJSON(t, name, got)
	}
}

func seedLimitsDoc() Limits {
	return Limits{
		Definitions: []Definition{
			{LimitID: "org_monthly_budget", Type: BudgetUSD, Period: "month", Posture: onHardOpen, Level: "org",
				Amount: 1000 * NanosPerUSD, OverrideAllowed: true, OverrideMax: 5000 * NanosPerUSD},
			{LimitID: "team_rpm", Type: RPM, Period: "1m0s", Posture: Posture{Mode: "shadow"}, Level: "team", Amount: 2, OverrideMax: -1},
			{LimitID: "team_tpm", Type: TPM, Period: "1m0s", Posture: onHardOpen, Level: "team", Amount: 20000, OverrideMax: -1},
			{LimitID: "user_concurrency", Type: Concurrency, Posture: onHardOpen, Level: "user", Amount: 10, OverrideMax: -1},
		},
		Note: seedLimitsNote,
	}
}

func TestSeedLimits(t *testing.T) {
	d := seedLimitsDoc()
	got := string(d.AppendJSON(nil))
	if got != seedLimits {
		t.Errorf("governance/limits:\n got: %s\nwant: %s", got, seedLimits)
	}
	checkJSON(t, "limits", []byte(got))
}

func TestLimitsGoldens(t *testing.T) {
	d := seedLimitsDoc()
	d.Note = LimitsNote
	d.Definitions = append(d.Definitions,
		Definition{LimitID: "ml_daily", Type: BudgetUSD, Period: "day", Posture: onHardOpen, Node: "org:acme/team:ml", Amount: 200 * NanosPerUSD, OverrideMax: -1},
		Definition{LimitID: "team_monthly_tokens", Type: QuotaTokens, Period: "month", Posture: Posture{Mode: "on", Enforce: "soft"}, Level: "team", Amount: 50000000, OverrideAllowed: true, OverrideMax: 80000000},
		Definition{LimitID: "team_daily_requests", Type: QuotaRequests, Period: "day", Posture: Posture{Mode: "off"}, Level: "team", Amount: 20000, OverrideAllowed: true, OverrideMax: -1},
	)
	d.Overrides = []OverrideEntry{
		{LimitID: "org_monthly_budget", Type: BudgetUSD, Node: "org:acme", Amount: 2500 * NanosPerUSD},
		{LimitID: "team_monthly_tokens", Type: QuotaTokens, Node: "org:acme/team:search", Amount: 75000000},
	}
	got := d.AppendJSON(nil)
	checkGolden(t, "limits_overrides", string(got))
	checkJSON(t, "limits_overrides", got)
	empty := Limits{Note: LimitsNote}
	checkGolden(t, "limits_empty", string(empty.AppendJSON(nil)))
}

// checkJSON requires b to be one valid JSON value that encoding/json can
// read back.
func checkJSON(t *testing.T, name string, b []byte) {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Errorf("%s: not valid JSON: %v\n%s", name, err, b)
	}
}
