package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/tokentriage/tokentriage/internal/stub"
)

// TestDisconnectReleasesLease holds user_concurrency's four slots with slow
// streams, meets the limit with a fifth request, then has every client
// leave mid-stream: the filter sees each disconnect, releases the leases
// (the gauge in /tt/v1/me returns to 0), and the next request is served.
func TestDisconnectReleasesLease(t *testing.T) {
	ctx := testContext(t)
	s := startDev(t, "testdata/e2e.yaml", "")
	key := mint(ctx, t, s, dev1)
	// 20 events a second apart: each stream stays open for the whole test
	// unless its client leaves.
	slow := openaiClient(s, key, option.WithHeader(stub.HeaderChunkDelayMS, "1000"))
	params := openai.ChatCompletionNewParams{
		Model:    openai.ChatModelGPT4oMini,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Take your time.")},
	}

	type open struct {
		cancel context.CancelFunc
		stream *ssestream.Stream[openai.ChatCompletionChunk]
	}
	var streams []open
	for i := range 4 {
		sctx, cancel := context.WithCancel(ctx)
		st := slow.Chat.Completions.NewStreaming(sctx, params)
		if !st.Next() {
			cancel()
			t.Fatalf("stream %d: no first chunk: %v", i, st.Err())
		}
		streams = append(streams, open{cancel, st})
	}
	waitObserved(ctx, t, s, key, "user_concurrency", 4)

	fast := openaiClient(s, key)
	_, err := fast.Chat.Completions.New(ctx, chatParams)
	wantOpenAIError(t, err, 429, "concurrency_exceeded", "user_concurrency")

	for _, o := range streams {
		o.cancel()
		o.stream.Close()
	}
	eventually(ctx, t, "the leases come back", func() (bool, string) {
		l := me(ctx, t, s, key).limit(t, "user_concurrency")
		return l.Observed == 0, fmt.Sprintf("user_concurrency observed %d", l.Observed)
	})
	if _, err := fast.Chat.Completions.New(ctx, chatParams); err != nil {
		t.Errorf("after the disconnects: %v", err)
	}
}
