// Package stub owns the deterministic stub upstream that `tokentriage dev`,
// the tests and the benchmarks put behind the gateway in place of an LLM
// provider. It answers the five governed endpoints in each provider's wire
// shape, JSON and SSE, with usage that follows from the request alone (and
// GET /v1/models and /v1/models/{id}, in OpenAI's shape or, to a client
// sending anthropic-version, Anthropic's, and Anthropic's count_tokens):
//
//   - prompt tokens = ceil(PromptBytes/4), at least 1, where PromptBytes is
//     what shared/llm measures (so the stub and the filter agree);
//   - completion tokens = 20, or the request's output maximum when smaller,
//     or the value of the X-Stub-Completion-Tokens header;
//   - the reply text is 4 bytes per completion token, so an estimate from
//     streamed text equals the reported count.
//
// Request headers steer it: X-Stub-Delay-Ms delays the answer,
// X-Stub-Chunk-Delay-Ms spaces SSE events, X-Stub-Pieces sets how many
// deltas a streamed reply has, X-Stub-Status forces an error
// status with a provider-shaped error body, X-Stub-Cached-Tokens reports
// part of the prompt as cached. The served model echoes the requested one.
// It remembers the last requests it saw (method, path, headers, body) so a
// test can assert what reached the upstream.
package stub

import (
	"context"
	"errors"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokentriage/tokentriage/shared/llm"
)

// Request headers the stub reads.
const (
	// HeaderCompletionTokens sets the completion token count (a
	// non-negative integer), overriding the default and max_tokens.
	HeaderCompletionTokens = "X-Stub-Completion-Tokens"
	// HeaderDelayMS delays the answer by this many milliseconds.
	HeaderDelayMS = "X-Stub-Delay-Ms"
	// HeaderChunkDelayMS waits this many milliseconds between SSE events.
	HeaderChunkDelayMS = "X-Stub-Chunk-Delay-Ms"
	// HeaderStatus forces an error answer with this status (400-599).
	HeaderStatus = "X-Stub-Status"
	// HeaderPieces splits a streamed reply into at most this many
	// deltas of whole tokens (one event each), instead of one per token
	// up to 64 and 64 beyond: with HeaderCompletionTokens it sets how many
	// events a stream has.
	HeaderPieces = "X-Stub-Pieces"
	// HeaderCachedTokens reports this many prompt tokens as cached (capped
	// at the prompt): OpenAI's cached_tokens, Anthropic's
	// cache_read_input_tokens.
	HeaderCachedTokens = "X-Stub-Cached-Tokens"
)

// DefaultCompletionTokens is the completion length when neither the
// request's maximum nor HeaderCompletionTokens says otherwise.
const DefaultCompletionTokens = 20

// MaxCompletionTokens is the largest HeaderCompletionTokens value (4 MB of
// reply text).
const MaxCompletionTokens = 1 << 20

// Created is the fixed creation time (Unix seconds) in every answer: the
// stub reads no clock, so equal requests get equal answers.
const Created = 1767225600

// MaxBodyBytes is the largest request body the stub reads.
const MaxBodyBytes = 32 << 20

// Options configure a Stub. The zero value is ready to use.
type Options struct {
	// History is how many requests Requests remembers: 0 means 32, a
	// negative number none.
	History int
	// Models are listed by GET /v1/models; empty means DefaultModels.
	Models []string
}

// DefaultModels are listed by GET /v1/models when Options.Models is empty.
var DefaultModels = []string{"gpt-4o-mini", "gpt-4o", "gpt-4.1", "o4-mini", "text-embedding-3-small", "claude-sonnet-4-20250514", "claude-3-5-haiku-latest"}

// Stub is the stub upstream, an http.Handler safe for concurrent use.
type Stub struct {
	models []string
	served atomic.Int64

	mu      sync.Mutex
	history []Recorded // ring of the last len(history) requests
	next    int        // where the next one goes
	filled  bool       // the ring has wrapped
}

var _ http.Handler = (*Stub)(nil)

// New returns a stub upstream.
func New(opts Options) *Stub {
	n := opts.History
	if n == 0 {
		n = 32
	}
	if n < 0 {
		n = 0
	}
	models := opts.Models
	if len(models) == 0 {
		models = DefaultModels
	}
	return &Stub{models: models, history: make([]Recorded, n)}
}

// Served is how many requests the stub has received.
func (s *Stub) Served() int64 { return s.served.Load() }

// ServeHTTP answers one request.
func (s *Stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.served.Add(1)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	s.record(r, body)
	ep := llm.EndpointOf(r.URL.Path)
	if err != nil {
		writeError(w, ep, http.StatusRequestEntityTooLarge, "stub: request body: "+err.Error())
		return
	}
	if ep == llm.Unknown {
		if id, ok := modelsPath(r.URL.Path); ok && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			s.serveModels(w, r, id)
			return
		}
		if isCountTokens(r.URL.Path) && r.Method == http.MethodPost {
			serveCountTokens(w, body)
			return
		}
		writeError(w, ep, http.StatusNotFound, "stub: no route for "+r.Method+" "+r.URL.Path+
			"; the stub serves POST /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses, /v1/messages, /v1/messages/count_tokens and GET /v1/models, /v1/models/{id}")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, ep, http.StatusMethodNotAllowed, "stub: "+r.URL.Path+": method "+r.Method+" not allowed; use POST")
		return
	}
	ctl, err := readControls(r.Header)
	if err != nil {
		writeError(w, ep, http.StatusBadRequest, err.Error())
		return
	}
	if !sleep(r.Context(), ctl.delay) {
		return
	}
	if ctl.status != 0 {
		writeError(w, ep, ctl.status, "stub: status "+strconv.Itoa(ctl.status)+" forced by "+HeaderStatus)
		return
	}
	req, err := llm.ParseRequest(r.URL.Path, body)
	if err != nil {
		writeError(w, ep, http.StatusBadRequest, err.Error())
		return
	}
	p := newPlan(req, body, ctl)
	if req.Stream && ep != llm.Embeddings {
		sw := newSSE(w, r.Context(), ctl.chunkDelay)
		switch ep {
		case llm.ChatCompletions, llm.Completions:
			streamOpenAI(sw, p)
		case llm.Responses:
			streamResponses(sw, p)
		case llm.Messages:
			streamMessages(sw, p)
		}
		return
	}
	out := make([]byte, 0, 1024+len(p.text))
	switch ep {
	case llm.ChatCompletions:
		out = chatBody(out, p)
	case llm.Completions:
		out = completionBody(out, p)
	case llm.Embeddings:
		out = embeddingsBody(out, p, body)
	case llm.Responses:
		out = responsesBody(out, p)
	case llm.Messages:
		out = messageBody(out, p)
	}
	writeJSON(w, ep, http.StatusOK, out, p.id)
}

// controls are the X-Stub-* headers of one request.
type controls struct {
	completion        int64 // -1 when not set
	pieces            int64 // 0 when not set
	cached            int64
	delay, chunkDelay time.Duration
	status            int
}

func readControls(h http.Header) (controls, error) {
	c := controls{completion: -1}
	var err error
	num := func(name string, max int64) int64 {
		v := h.Get(name)
		if v == "" || err != nil {
			return -1
		}
		n, perr := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if perr != nil || n < 0 || n > max {
			err = errors.New("stub: header " + name + ": must be an integer from 0 to " + strconv.FormatInt(max, 10) + "; got " + strconv.Quote(v))
			return -1
		}
		return n
	}
	c.completion = num(HeaderCompletionTokens, MaxCompletionTokens)
	if n := num(HeaderPieces, MaxCompletionTokens); n > 0 {
		c.pieces = n
	}
	if n := num(HeaderCachedTokens, 1<<40); n > 0 {
		c.cached = n
	}
	if n := num(HeaderDelayMS, 600_000); n > 0 {
		c.delay = time.Duration(n) * time.Millisecond
	}
	if n := num(HeaderChunkDelayMS, 60_000); n > 0 {
		c.chunkDelay = time.Duration(n) * time.Millisecond
	}
	if v := h.Get(HeaderStatus); v != "" && err == nil {
		n, perr := strconv.Atoi(strings.TrimSpace(v))
		if perr != nil || n < 400 || n > 599 {
			return c, errors.New("stub: header " + HeaderStatus + ": must be an error status from 400 to 599; got " + strconv.Quote(v))
		}
		c.status = n
	}
	return c, err
}

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// requestID derives a stable id from the body, so equal requests get
// equal answers.
func requestID(body []byte) string {
	h := fnv.New64a()
	h.Write(body)
	return strconv.FormatUint(h.Sum64(), 36)
}
