package e2e

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/tokentriage/tokentriage/accountant/pricing"
	"github.com/tokentriage/tokentriage/internal/devserver"
	"github.com/tokentriage/tokentriage/internal/stub"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/llm"
)

// openaiClient is the OpenAI SDK at its default settings (retries on).
func openaiClient(s *devserver.Server, key string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(s.URL() + "/v1/"),
		option.WithAPIKey(key),
	}, opts...)...)
}

// anthropicClient is the Anthropic SDK at its default settings.
func anthropicClient(s *devserver.Server, key string, opts ...aoption.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]aoption.RequestOption{
		aoption.WithoutEnvironmentDefaults(),
		aoption.WithBaseURL(s.URL() + "/"),
		aoption.WithAPIKey(key),
	}, opts...)...)
}

// served is what the stub's deterministic usage says one request that
// reached it costs: prompt tokens, completion tokens, and the price.
type served struct {
	in, out, nanos int64
}

// lastServed reads the request the stub saw last and works out its usage
// by the stub's rules and its price by the accountant's catalog.
func lastServed(t *testing.T, st *stub.Stub) (served, stub.Recorded) {
	t.Helper()
	rec, ok := st.Last()
	if !ok {
		t.Fatal("the stub saw no request")
	}
	u, err := url.ParseRequestURI(rec.URI)
	if err != nil {
		t.Fatal(err)
	}
	req, err := llm.ParseRequest(u.Path, rec.Body)
	if err != nil {
		t.Fatalf("%s: %v", rec.URI, err)
	}
	in, out := stub.PromptTokens(req), stub.CompletionTokens(req, -1)
	cost := pricing.Default().Price(req.Model, ledger.Usage{Input: in, Output: out, Total: in + out})
	if cost.Unpriced || cost.Nanos <= 0 {
		t.Fatalf("%s is not priced: %+v", req.Model, cost)
	}
	return served{in, out, cost.Nanos}, rec
}

// TestOfficialSDKs drives the gateway with the OpenAI and Anthropic Go SDKs
// (chat, streaming with and without include_usage, embeddings, messages and
// their stream), checks each answer's usage against the stub's
// deterministic figures, that the virtual key never reached the upstream,
// and that the spend of those calls lands in the accountant's counters and
// in /tt/v1/me once the rows are flushed and synced.
func TestOfficialSDKs(t *testing.T) {
	ctx := testContext(t)
	s := startDev(t, "testdata/e2e.yaml", "")
	key := mint(ctx, t, s, dev1)
	oai := openaiClient(s, key)
	ant := anthropicClient(s, key)
	var total served
	var requests int64
	add := func(u served) {
		total.in += u.in
		total.out += u.out
		total.nanos += u.nanos
		requests++
	}

	t.Run("chat", func(t *testing.T) {
		resp, err := oai.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:     openai.ChatModelGPT4oMini,
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the capital of Germany?")},
			MaxTokens: openai.Int(16),
		})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := lastServed(t, s.Stub())
		add(want)
		if resp.Usage.PromptTokens != want.in || resp.Usage.CompletionTokens != want.out || resp.Choices[0].Message.Content != stub.Reply(want.out) {
			t.Errorf("usage %+v, content %q; want %d+%d tokens", resp.Usage, resp.Choices[0].Message.Content, want.in, want.out)
		}
	})

	for _, c := range []struct {
		name         string
		includeUsage bool
	}{{"stream", false}, {"stream_include_usage", true}} {
		t.Run(c.name, func(t *testing.T) {
			p := openai.ChatCompletionNewParams{
				Model:    openai.ChatModelGPT4oMini,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Write a long story about the sea.")},
			}
			if c.includeUsage {
				p.StreamOptions.IncludeUsage = openai.Bool(true)
			}
			stream := oai.Chat.Completions.NewStreaming(ctx, p)
			var text strings.Builder
			var usage []openai.CompletionUsage
			chunks := 0
			for stream.Next() {
				ch := stream.Current()
				chunks++
				if ch.JSON.Usage.Valid() {
					usage = append(usage, ch.Usage)
				}
				if len(ch.Choices) == 0 && !c.includeUsage {
					t.Errorf("chunk %d has no choices (a usage chunk the client did not ask for): %s", chunks, ch.RawJSON())
				}
				for _, choice := range ch.Choices {
					text.WriteString(choice.Delta.Content)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			want, rec := lastServed(t, s.Stub())
			add(want)
			if got := gjson.GetBytes(rec.Body, "stream_options.include_usage"); !got.Bool() {
				t.Errorf("the upstream was not asked for usage (stream_options %s): the filter adds it to every streaming request", got.Raw)
			}
			if text.String() != stub.Reply(want.out) || chunks < 2 {
				t.Errorf("%d chunks streamed %q", chunks, text.String())
			}
			switch {
			case c.includeUsage && (len(usage) != 1 || usage[0].PromptTokens != want.in || usage[0].CompletionTokens != want.out):
				t.Errorf("usage chunks %+v, want one of %d+%d tokens", usage, want.in, want.out)
			case !c.includeUsage && len(usage) != 0:
				t.Errorf("the client did not ask for usage but got %+v", usage)
			}
		})
	}

	t.Run("embeddings", func(t *testing.T) {
		resp, err := oai.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: openai.EmbeddingModelTextEmbedding3Small,
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"the quick brown fox", "jumps over the lazy dog"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := lastServed(t, s.Stub())
		add(want)
		if resp.Usage.PromptTokens != want.in || want.out != 0 || len(resp.Data) != 2 {
			t.Errorf("usage %+v with %d vectors; want %d prompt tokens, 2 vectors", resp.Usage, len(resp.Data), want.in)
		}
	})

	t.Run("messages", func(t *testing.T) {
		msg, err := ant.Messages.New(ctx, anthropic.MessageNewParams{
			Model:     "claude-3-5-haiku-latest",
			MaxTokens: 12,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Name three rivers."))},
		})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := lastServed(t, s.Stub())
		add(want)
		if msg.Usage.InputTokens != want.in || msg.Usage.OutputTokens != want.out || want.out != 12 {
			t.Errorf("usage %+v; want %d+%d tokens", msg.Usage, want.in, want.out)
		}
	})

	// Anthropic's own SDKs once sent the key as x-api-key; the stream goes
	// that way, so both headers are covered.
	t.Run("messages_stream_x_api_key", func(t *testing.T) {
		c := anthropic.NewClient(
			aoption.WithoutEnvironmentDefaults(),
			aoption.WithBaseURL(s.URL()+"/"),
			aoption.WithHeader("X-Api-Key", key),
		)
		stream := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model:     "claude-3-5-haiku-latest",
			MaxTokens: 64,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me about the Rhine."))},
		})
		var msg anthropic.Message
		events := 0
		for stream.Next() {
			events++
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		want, rec := lastServed(t, s.Stub())
		add(want)
		if rec.Header.Get("X-Api-Key") != "" || rec.Header.Get("Authorization") != "" {
			t.Errorf("a credential reached the stub: %v", rec.Header)
		}
		var text strings.Builder
		for _, b := range msg.Content {
			text.WriteString(b.Text)
		}
		if msg.Usage.InputTokens != want.in || msg.Usage.OutputTokens != want.out || text.String() != stub.Reply(want.out) || events < 4 {
			t.Errorf("%d events, usage %+v, text %q; want %d+%d tokens", events, msg.Usage, text.String(), want.in, want.out)
		}
	})
	if t.Failed() {
		return
	}

	// The virtual key never reached the upstream, in any header.
	for _, rec := range s.Stub().Requests() {
		for name, vs := range rec.Header {
			for _, v := range vs {
				if strings.Contains(v, key) || strings.Contains(v, "tt-vk_") {
					t.Errorf("%s %s reached the stub with the virtual key in %s", rec.Method, rec.URI, name)
				}
			}
		}
	}

	// The spend lands in the accountant's counters once the filters have
	// flushed their rows, then in /tt/v1/me at the filters' next sync.
	tokens := total.in + total.out
	eventually(ctx, t, "the accountant's counters hold the calls", func() (bool, string) {
		r, tk, usd := counter(t, s, "user_daily_requests", dev1), counter(t, s, "team_monthly_tokens", "org:acme/team:ml"), counter(t, s, "acme_month", "org:acme")
		return r == requests && tk == tokens && usd == total.nanos,
			fmt.Sprintf("requests %d/%d, tokens %d/%d, nanodollars %d/%d", r, requests, tk, tokens, usd, total.nanos)
	})
	eventually(ctx, t, "/tt/v1/me shows the spend", func() (bool, string) {
		doc := me(ctx, t, s, key)
		r, tk, usd := doc.limit(t, "user_daily_requests"), doc.limit(t, "team_monthly_tokens"), doc.limit(t, "acme_month")
		n, err := nanos(usd.ObservedUSD.USD)
		if err != nil {
			t.Fatal(err)
		}
		return r.Observed == requests && tk.Observed == tokens && n == total.nanos && n > 0 && !usd.ObservedUSD.Unpriced,
			fmt.Sprintf("requests %d/%d, tokens %d/%d, observed_usd %s (%d/%d nanodollars, unpriced %v)",
				r.Observed, requests, tk.Observed, tokens, usd.ObservedUSD.USD, n, total.nanos, usd.ObservedUSD.Unpriced)
	})
}
