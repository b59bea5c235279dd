package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/shared"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/internal/devserver"
	"github.com/tokentriage/tokentriage/internal/stub"
	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// The users of testdata/sdk.yaml.
const (
	paced   = "org:acme/team:ml/user:paced"
	broke   = "org:acme/team:ml/user:broke"
	monthly = "org:acme/team:ml/user:monthly"
	bounded = "org:acme/team:ml/user:bounded"
	single  = "org:acme/team:ml/user:single"
	keysOf  = "org:acme/team:ml/user:keys"
	lister  = "org:acme/team:ml/user:lister"
)

// attempt is one HTTP exchange an SDK made.
type attempt struct {
	status      int
	refusedBy   string
	shouldRetry string
	at          time.Time
}

// recorder is an SDK's transport: it records every attempt, so a test sees
// how many requests one SDK call made and what each was answered.
type recorder struct {
	mu   sync.Mutex
	seen []attempt
}

func (r *recorder) RoundTrip(q *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(q)
	if err == nil {
		r.mu.Lock()
		r.seen = append(r.seen, attempt{status: resp.StatusCode, refusedBy: resp.Header.Get("X-Tt-Refused-By"),
			shouldRetry: resp.Header.Get("X-Should-Retry"), at: time.Now()})
		r.mu.Unlock()
	}
	return resp, err
}

// take returns the attempts since the last take.
func (r *recorder) take() []attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.seen
	r.seen = nil
	return out
}

// defaultClients are the official SDKs at their default settings (two
// retries, their own backoff and Retry-After handling), their attempts
// recorded.
func defaultClients(s *devserver.Server, key string) (openai.Client, anthropic.Client, *recorder) {
	rec := &recorder{}
	hc := &http.Client{Transport: rec}
	return openai.NewClient(option.WithBaseURL(s.URL()+"/v1/"), option.WithAPIKey(key), option.WithHTTPClient(hc)),
		anthropic.NewClient(aoption.WithoutEnvironmentDefaults(), aoption.WithBaseURL(s.URL()+"/"), aoption.WithAPIKey(key), aoption.WithHTTPClient(hc)),
		rec
}

// awaitPeriodRoom waits, when the calendar period of unit ends within the
// next 90 s, until the next one has begun: a refusal a minute before a
// reset is rightly retried, and these tests want the ones that are not.
func awaitPeriodRoom(ctx context.Context, t *testing.T, end func(time.Time) time.Time) {
	t.Helper()
	eventually(ctx, t, "a calendar period with more than 90 s left", func() (bool, string) {
		now := time.Now()
		left := end(now).Sub(now)
		return left > 90*time.Second, left.String()
	})
}

func dayEnd(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
}

func monthEnd(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
}

// wantOneAttempt checks a refused SDK call made exactly one request,
// refused by limit and marked not to be retried.
func wantOneAttempt(t *testing.T, what string, got []attempt, limit string) {
	t.Helper()
	if len(got) != 1 || got[0].status != 429 || got[0].refusedBy != limit || got[0].shouldRetry != "false" {
		t.Errorf("%s: attempts %+v, want one 429 by %s with X-Should-Retry: false", what, got, limit)
	}
}

// openaiErr checks err is the OpenAI SDK's typed error for a 429 of
// errType, carrying the gateway's request id in the headers the SDK reads.
func openaiErr(t *testing.T, what string, err error, errType string) {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: want an *openai.Error, got %T %v", what, err, err)
	}
	id := e.Response.Header.Get("X-Tt-Request-Id")
	if e.StatusCode != 429 || e.Type != errType || id == "" || e.Response.Header.Get("X-Request-Id") != id {
		t.Errorf("%s: %d %q, request ids %q / %q: %s", what, e.StatusCode, e.Type, id, e.Response.Header.Get("X-Request-Id"), e.RawJSON())
	}
}

// anthropicRateLimit checks err is the Anthropic SDK's typed error for a
// 429 in Anthropic's envelope (error.type rate_limit_error, parsing as a
// RateLimitError), our type in its error code, and the request id the SDK
// read.
func anthropicRateLimit(t *testing.T, what string, err error, errType string) {
	t.Helper()
	var e *anthropic.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: want an *anthropic.Error, got %T %v", what, err, err)
	}
	var body shared.ErrorResponse
	if uerr := body.UnmarshalJSON([]byte(e.RawJSON())); uerr != nil {
		t.Fatalf("%s: the body is not Anthropic's error envelope: %v: %s", what, uerr, e.RawJSON())
	}
	if _, ok := body.Error.AsAny().(shared.RateLimitErrorObject); !ok || e.Type() != shared.ErrorTypeRateLimitError {
		t.Errorf("%s: error.type %q (%T), want a RateLimitError: %s", what, e.Type(), body.Error.AsAny(), e.RawJSON())
	}
	id := e.Response.Header.Get("X-Tt-Request-Id")
	if e.StatusCode != 429 || string(e.ErrorCode()) != errType || e.RequestID == "" || e.RequestID != id || body.RequestID != id {
		t.Errorf("%s: %d code %q, request id %q (header %q, body %q)", what, e.StatusCode, e.ErrorCode(), e.RequestID, id, body.RequestID)
	}
}

var noMax = openai.ChatCompletionNewParams{
	Model:    openai.ChatModelGPT4oMini,
	Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hi")},
}

// TestSDKDefaultSettings drives the gateway with the official OpenAI and
// Anthropic Go SDKs at their default settings (two retries, their own
// backoff and Retry-After handling), on one dev system: every kind of
// refusal, per-key limits, the model list and count_tokens.
func TestSDKDefaultSettings(t *testing.T) {
	ctx := testContext(t)
	s := startDev(t, "testdata/sdk.yaml", "")
	t.Run("retries", func(t *testing.T) { sdkRetries(ctx, t, s) })
	t.Run("per_key", func(t *testing.T) { sdkPerKeyLimits(ctx, t, s) })
	t.Run("models_and_count_tokens", func(t *testing.T) { sdkModelsAndCountTokens(ctx, t, s) })
}

// sdkRetries drives every kind of refusal through the SDKs: a refusal
// that clears within seconds (an rpm window) is retried after the wait the
// gateway names and then served; one that cannot clear within a minute (a
// day's budget, a month's quota, an unfittable reserve) and a concurrency
// refusal (a slot frees on no clock, RATIONALE.md) fail at once, in one
// request. Each typed error carries the request id the SDK reads.
func sdkRetries(ctx context.Context, t *testing.T, s *devserver.Server) {

	t.Run("rpm_retried_then_served", func(t *testing.T) {
		oai, ant, rec := defaultClients(s, mint(ctx, t, s, paced))
		if _, err := oai.Chat.Completions.New(ctx, chatParams); err != nil {
			t.Fatal(err)
		}
		rec.take()
		// One a 2 s window: refused, retried after Retry-After-Ms, served.
		if _, err := oai.Chat.Completions.New(ctx, chatParams); err != nil {
			t.Fatalf("openai: %v", err)
		}
		got := rec.take()
		if len(got) != 2 || got[0].status != 429 || got[0].refusedBy != "key_rpm" || got[0].shouldRetry != "true" || got[1].status != 200 {
			t.Errorf("openai: attempts %+v, want a key_rpm 429 marked retryable, then 200", got)
		} else {
			t.Logf("openai: retried %v after the refusal", got[1].at.Sub(got[0].at))
		}
		if _, err := ant.Messages.New(ctx, messageParams); err != nil {
			t.Fatalf("anthropic: %v", err)
		}
		got = rec.take()
		if len(got) != 2 || got[0].status != 429 || got[0].shouldRetry != "true" || got[1].status != 200 {
			t.Errorf("anthropic: attempts %+v, want a 429 marked retryable, then 200", got)
		}
	})

	t.Run("daily_budget_fails_fast", func(t *testing.T) {
		awaitPeriodRoom(ctx, t, dayEnd)
		spender := mint(ctx, t, s, broke)
		oai, _, _ := defaultClients(s, spender)
		if _, err := oai.Chat.Completions.New(ctx, chatParams); err != nil {
			t.Fatal(err)
		}
		waitSpent(ctx, t, s, spender, "broke_day")
		// Other keys of the same user (each call on a key of its own: a
		// refused call still spends its key's rpm arrival): the user's
		// budget is spent.
		oai, _, rec := defaultClients(s, mint(ctx, t, s, broke))
		start := time.Now()
		_, err := oai.Chat.Completions.New(ctx, chatParams)
		t.Logf("openai: refused in %v", time.Since(start))
		openaiErr(t, "openai", err, "budget_exceeded")
		wantOneAttempt(t, "openai", rec.take(), "broke_day")
		_, ant, rec := defaultClients(s, mint(ctx, t, s, broke))
		_, err = ant.Messages.New(ctx, messageParams)
		anthropicRateLimit(t, "anthropic", err, "budget_exceeded")
		wantOneAttempt(t, "anthropic", rec.take(), "broke_day")
	})

	t.Run("monthly_quota_fails_fast", func(t *testing.T) {
		awaitPeriodRoom(ctx, t, monthEnd)
		first := mint(ctx, t, s, monthly)
		_, ant, _ := defaultClients(s, first)
		if _, err := ant.Messages.New(ctx, messageParams); err != nil {
			t.Fatal(err)
		}
		waitObserved(ctx, t, s, first, "monthly_requests", 1)
		_, ant, rec := defaultClients(s, mint(ctx, t, s, monthly))
		_, err := ant.Messages.New(ctx, messageParams)
		anthropicRateLimit(t, "anthropic", err, "quota_exhausted")
		wantOneAttempt(t, "anthropic", rec.take(), "monthly_requests")
		oai, _, rec := defaultClients(s, mint(ctx, t, s, monthly))
		_, err = oai.Chat.Completions.New(ctx, chatParams)
		openaiErr(t, "openai", err, "quota_exhausted")
		wantOneAttempt(t, "openai", rec.take(), "monthly_requests")
	})

	t.Run("unfittable_fails_fast", func(t *testing.T) {
		oai, _, rec := defaultClients(s, mint(ctx, t, s, bounded))
		// No max_tokens: the reserve is the prompt and 16,384 output
		// tokens, more than the 16,384-token window can ever hold.
		_, err := oai.Chat.Completions.New(ctx, noMax)
		openaiErr(t, "openai", err, "quota_cost_unfittable")
		wantOneAttempt(t, "openai", rec.take(), "bounded_tpm")
		// With max_tokens it fits.
		if _, err := oai.Chat.Completions.New(ctx, chatParams); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("concurrency_fails_fast", func(t *testing.T) {
		// Every key first (minting waits for the gateway to know it), so
		// the refusals meet the held call.
		holder, _, _ := defaultClients(s, mint(ctx, t, s, single))
		oai, _, orec := defaultClients(s, mint(ctx, t, s, single))
		_, ant, arec := defaultClients(s, mint(ctx, t, s, single))
		before := s.Stub().Served()
		// The held call ends when the test has seen the refusals.
		hctx, release := context.WithCancel(ctx)
		held := make(chan error, 1)
		go func() {
			_, err := holder.Chat.Completions.New(hctx, chatParams, option.WithHeader(stub.HeaderDelayMS, "60000"))
			held <- err
		}()
		eventually(ctx, t, "the first call held at the upstream", func() (bool, string) {
			return s.Stub().Served() > before, "not yet"
		})
		_, err := oai.Chat.Completions.New(ctx, chatParams)
		openaiErr(t, "openai", err, "concurrency_exceeded")
		wantOneAttempt(t, "openai", orec.take(), "single_concurrency")
		_, err = ant.Messages.New(ctx, messageParams)
		anthropicRateLimit(t, "anthropic", err, "concurrency_exceeded")
		wantOneAttempt(t, "anthropic", arec.take(), "single_concurrency")
		release()
		<-held
	})
}

// waitSpent waits until /tt/v1/me shows limit's dollars spent.
func waitSpent(ctx context.Context, t *testing.T, s *devserver.Server, key, limit string) {
	t.Helper()
	eventually(ctx, t, "/tt/v1/me shows "+limit+" spent", func() (bool, string) {
		l := me(ctx, t, s, key).limit(t, limit)
		n, err := nanos(l.ObservedUSD.USD)
		return err == nil && n > 0, string(l.ObservedUSD.USD)
	})
}

// sdkPerKeyLimits: a key-level rpm and a key-level budget hold end to end
// for each key on its own: two keys of one user, each minted with its own
// lowered budget, have separate counters, and the 429 names the key's
// node.
func sdkPerKeyLimits(ctx context.Context, t *testing.T, s *devserver.Server) {
	tiny := config.USD{Nanos: 1}
	mintTiny := func() api.MintedKey {
		k, err := s.Admin().Mint(ctx, api.MintRequest{Owner: keysOf, Overrides: []api.KeyOverride{{LimitID: "key_day", AmountUSD: &tiny}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WaitKey(ctx, k.Key); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "the gateway holds "+k.KID+"'s override", func() (bool, string) {
			var d struct {
				Limits []struct {
					LimitID  string `json:"limit_id"`
					LimitUSD struct {
						USD json.Number `json:"usd"`
					} `json:"limit_usd"`
				} `json:"limits"`
			}
			doc := meAt(ctx, t, s.URL(), k.Key, &d)
			for _, l := range d.Limits {
				if l.LimitID == "key_day" {
					return l.LimitUSD.USD == "0.000000001", doc
				}
			}
			return false, doc
		})
		return k
	}
	a, b := mintTiny(), mintTiny()
	oaiA, _, recA := defaultClients(s, a.Key)
	oaiB, antB, recB := defaultClients(s, b.Key)

	// The per-key rpm: a second request of a's at once is refused at a's
	// node; b, of the same user, is not held back.
	if _, err := oaiA.Chat.Completions.New(ctx, chatParams); err != nil {
		t.Fatal(err)
	}
	recA.take()
	raw, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","max_tokens":8,"messages":[{"role":"user","content":"Say hi"}]}`))
	raw.Header.Set("Authorization", "Bearer "+a.Key)
	resp, body := testkit.Send(t, raw)
	if resp.StatusCode != 429 || gjsonString(string(body), "error.refused_by.limit_id") != "key_rpm" ||
		gjsonString(string(body), "error.refused_by.node") != govern.KeyLeaf(keysOf, a.KID) || resp.Header.Get("X-Should-Retry") != "true" {
		t.Errorf("a's second request at once: %d %s", resp.StatusCode, body)
	}
	if _, err := oaiB.Chat.Completions.New(ctx, chatParams); err != nil {
		t.Fatal(err)
	}
	if got := recB.take(); len(got) != 1 || got[0].status != 200 {
		t.Errorf("b beside a's spent rpm: attempts %+v, want one 200", got)
	}

	// The per-key budget: a's $0.000000001 is spent by its first call; a
	// is refused at its own node, b only once its own call is folded.
	waitSpent(ctx, t, s, a.Key, "key_day")
	eventually(ctx, t, "a's rpm window frees", func() (bool, string) {
		return me(ctx, t, s, a.Key).limit(t, "key_rpm").Observed == 0, "not yet"
	})
	_, err := oaiA.Chat.Completions.New(ctx, chatParams)
	openaiErr(t, "a over its own budget", err, "budget_exceeded")
	wantOneAttempt(t, "a over its own budget", recA.take(), "key_day")
	var e *openai.Error
	if errors.As(err, &e) {
		if node := gjsonString(e.RawJSON(), "refused_by.node"); node != govern.KeyLeaf(keysOf, a.KID) {
			t.Errorf("refused_by.node %q, want a's node %s", node, govern.KeyLeaf(keysOf, a.KID))
		}
	}
	waitSpent(ctx, t, s, b.Key, "key_day")
	eventually(ctx, t, "b's rpm window frees", func() (bool, string) {
		return me(ctx, t, s, b.Key).limit(t, "key_rpm").Observed == 0, "not yet"
	})
	_, err = antB.Messages.New(ctx, messageParams)
	anthropicRateLimit(t, "b over its own budget", err, "budget_exceeded")
	// a key of the same user minted without an override keeps the
	// template's $100.
	oaiC, _, _ := defaultClients(s, mint(ctx, t, s, keysOf))
	if _, err := oaiC.Chat.Completions.New(ctx, chatParams); err != nil {
		t.Errorf("a third key of the same user: %v", err)
	}
}

// sdkModelsAndCountTokens: models.list() through both SDKs returns the
// models the key's scope allows, in each provider's shape, for a key with
// no allow_passthrough; Anthropic's count_tokens answers it too; neither
// spends.
func sdkModelsAndCountTokens(ctx context.Context, t *testing.T, s *devserver.Server) {
	k, err := s.MintKey(ctx, lister, vkey.Scopes{Models: []string{"gpt-4o*", "claude-3-5-haiku*"}})
	if err != nil {
		t.Fatal(err)
	}
	oai, ant, _ := defaultClients(s, k.Key)
	want := []string{"gpt-4o-mini", "gpt-4o", "claude-3-5-haiku-latest"}
	page, err := oai.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range page.Data {
		got = append(got, m.ID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("openai models.list: %v, want %v", got, want)
	}
	apage, err := ant.Models.List(ctx, anthropic.ModelListParams{})
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, m := range apage.Data {
		got = append(got, m.ID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("anthropic models.list: %v, want %v", got, want)
	}
	if _, err := oai.Models.Get(ctx, "gpt-4.1"); err == nil {
		t.Error("models.retrieve of a model outside the scope succeeded")
	} else if e := (*openai.Error)(nil); !errors.As(err, &e) || e.StatusCode != 404 {
		t.Errorf("models.retrieve outside the scope: %v", err)
	}
	n, err := ant.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
		Model:    "claude-3-5-haiku-latest",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the capital of Germany?"))},
	})
	if err != nil || n.InputTokens != 8 {
		t.Fatalf("count_tokens: %+v, %v", n, err)
	}
	if l := me(ctx, t, s, k.Key).limit(t, "key_day"); l.ObservedUSD.USD != "0" {
		t.Errorf("the list and the count spent %s", l.ObservedUSD.USD)
	}
}

func gjsonString(doc, path string) string { return gjson.Get(doc, path).String() }
