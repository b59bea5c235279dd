package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/tokentriage/tokentriage/internal/devserver"
)

var chatParams = openai.ChatCompletionNewParams{
	Model:     openai.ChatModelGPT4oMini,
	Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hi")},
	MaxTokens: openai.Int(8),
}

var messageParams = anthropic.MessageNewParams{
	Model:     "claude-3-5-haiku-latest",
	MaxTokens: 8,
	Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hi"))},
}

// wantOpenAIError checks err is the OpenAI SDK's typed error with status
// and our error.type, naming limit (when not "") in refused_by.
func wantOpenAIError(t *testing.T, err error, status int, errType, limit string) {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("want an *openai.Error %d %s, got %T %v", status, errType, err, err)
	}
	if e.StatusCode != status || e.Type != errType {
		t.Errorf("openai.Error %d type %q, want %d %q: %s", e.StatusCode, e.Type, status, errType, e.RawJSON())
	}
	if got := gjson.Get(e.RawJSON(), "refused_by.limit_id").String(); got != limit {
		t.Errorf("refused_by.limit_id %q, want %q: %s", got, limit, e.RawJSON())
	}
}

// wantAnthropicError is wantOpenAIError for the Anthropic SDK: the body is
// Anthropic's envelope, so error.type is Anthropic's type for the status
// (rate_limit_error for a 429), and ours is error.details.error_code, which
// the SDK reads as ErrorCode.
func wantAnthropicError(t *testing.T, err error, status int, errType, limit string) {
	t.Helper()
	var e *anthropic.Error
	if !errors.As(err, &e) {
		t.Fatalf("want an *anthropic.Error %d %s, got %T %v", status, errType, err, err)
	}
	want := map[int]string{401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}[status]
	if e.StatusCode != status || string(e.Type()) != want || string(e.ErrorCode()) != errType {
		t.Errorf("anthropic.Error %d type %q code %q, want %d %q code %q: %s", e.StatusCode, e.Type(), e.ErrorCode(), status, want, errType, e.RawJSON())
	}
	if e.RequestID == "" || e.RequestID != e.Response.Header.Get("X-Tt-Request-Id") {
		t.Errorf("anthropic.Error request id %q, want the X-Tt-Request-Id %q", e.RequestID, e.Response.Header.Get("X-Tt-Request-Id"))
	}
	if got := gjson.Get(e.RawJSON(), "error.refused_by.limit_id").String(); got != limit {
		t.Errorf("error.refused_by.limit_id %q, want %q: %s", got, limit, e.RawJSON())
	}
}

// TestRefusalsAreTypedSDKErrors meets limits through the SDKs at their
// default settings (none of these refusals is retried: an hour's rpm, a
// day's quota and an unknown key cannot clear within a minute): an rpm
// limit at gate 1 and a request quota
// settled by the accountant at gate 2 each surface as the SDK's typed error
// carrying our error.type and the limit that answered, and a refused
// request never reaches the upstream.
func TestRefusalsAreTypedSDKErrors(t *testing.T) {
	ctx := testContext(t)
	s := startDev(t, "testdata/e2e.yaml", "")

	t.Run("rate_limited", func(t *testing.T) {
		key := mint(ctx, t, s, search) // search_rpm: one an hour
		oai, ant := openaiClient(s, key), anthropicClient(s, key)
		before := s.Stub().Served()
		if _, err := oai.Chat.Completions.New(ctx, chatParams); err != nil {
			t.Fatal(err)
		}
		_, err := oai.Chat.Completions.New(ctx, chatParams)
		wantOpenAIError(t, err, 429, "rate_limited", "search_rpm")
		_, err = ant.Messages.New(ctx, messageParams)
		wantAnthropicError(t, err, 429, "rate_limited", "search_rpm")
		if n := s.Stub().Served() - before; n != 1 {
			t.Errorf("the stub served %d requests, want 1: a refused request never reaches it", n)
		}
	})

	t.Run("quota_exhausted", func(t *testing.T) {
		awaitPeriodRoom(ctx, t, dayEnd)
		key := mint(ctx, t, s, dev2) // dev2_daily_requests: one a day
		oai, ant := openaiClient(s, key), anthropicClient(s, key)
		if _, err := ant.Messages.New(ctx, messageParams); err != nil {
			t.Fatal(err)
		}
		// The quota is settled: refused once the accountant has folded the
		// row and the filter has synced the snapshot.
		waitObserved(ctx, t, s, key, "dev2_daily_requests", 1)
		_, err := oai.Chat.Completions.New(ctx, chatParams)
		wantOpenAIError(t, err, 429, "quota_exhausted", "dev2_daily_requests")
		_, err = ant.Messages.New(ctx, messageParams)
		wantAnthropicError(t, err, 429, "quota_exhausted", "dev2_daily_requests")
	})

	t.Run("unauthorized", func(t *testing.T) {
		unknown := "tt-vk_UnknownKey00-" + "0123456789abcdefghijABCDEFGHIJ01"
		oai, ant := openaiClient(s, unknown), anthropicClient(s, unknown)
		_, err := oai.Chat.Completions.New(ctx, chatParams)
		wantOpenAIError(t, err, 401, "unauthorized", "")
		_, err = ant.Messages.New(ctx, messageParams)
		wantAnthropicError(t, err, 401, "unauthorized", "")
	})
}

// waitObserved waits until /tt/v1/me with key shows limit's observed value
// at n.
func waitObserved(ctx context.Context, t *testing.T, s *devserver.Server, key, limit string, n int64) {
	t.Helper()
	eventually(ctx, t, fmt.Sprintf("/tt/v1/me shows %s at %d", limit, n), func() (bool, string) {
		l := me(ctx, t, s, key).limit(t, limit)
		return l.Observed == n, fmt.Sprintf("observed %d", l.Observed)
	})
}
