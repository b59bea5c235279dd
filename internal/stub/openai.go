package stub

import (
	"encoding/base64"
	"encoding/binary"
	"hash/fnv"
	"math"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/tokentriage/tokentriage/shared/llm"
)

// finishReason is OpenAI's finish_reason for the plan.
func (p plan) finishReason() string {
	switch {
	case p.truncated:
		return "length"
	case p.tool():
		return "tool_calls"
	}
	return "stop"
}

// toolCall appends a chat tool call; args is the arguments string (all of
// them, or "" in a stream's first chunk).
func toolCall(b []byte, p plan, args string, index bool) []byte {
	b = append(b, '{')
	if index {
		b = append(b, `"index":0,`...)
	}
	b = append(b, `"id":"`...)
	b = append(b, p.callID("call_")...)
	b = append(b, `","type":"function","function":{"name":`...)
	b = appendString(b, p.shape.name)
	b = append(b, `,"arguments":`...)
	b = appendString(b, args)
	return append(b, `}}`...)
}

// openAIUsage appends a chat or completions usage object.
func openAIUsage(b []byte, p plan) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = appendInt(b, p.prompt)
	b = append(b, `,"completion_tokens":`...)
	b = appendInt(b, p.completion)
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, p.prompt+p.completion)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = appendInt(b, p.cached)
	b = append(b, `,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
	return b
}

// openAIHead appends the members every chat or completions object opens
// with, up to and including `"model":"…",`.
func openAIHead(b []byte, p plan, object string) []byte {
	if p.req.Endpoint == llm.Completions {
		b = append(b, `{"id":"cmpl-stub`...)
	} else {
		b = append(b, `{"id":"chatcmpl-stub`...)
	}
	b = append(b, p.id...)
	b = append(b, `","object":"`...)
	b = append(b, object...)
	b = append(b, `","created":`...)
	b = appendInt(b, Created)
	b = append(b, `,"model":`...)
	b = appendString(b, p.req.Model)
	return append(b, ',')
}

// chatBody is a /v1/chat/completions answer.
func chatBody(b []byte, p plan) []byte {
	b = openAIHead(b, p, "chat.completion")
	b = append(b, `"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	if p.tool() {
		b = append(b, `null,"tool_calls":[`...)
		b = append(toolCall(b, p, p.text, false), ']')
	} else {
		b = appendString(b, p.text)
	}
	b = append(b, `,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"`...)
	b = append(b, p.finishReason()...)
	b = append(b, `"}],"usage":`...)
	b = openAIUsage(b, p)
	return append(b, `,"service_tier":"default","system_fingerprint":"fp_stub"}`...)
}

// completionBody is a /v1/completions answer.
func completionBody(b []byte, p plan) []byte {
	b = openAIHead(b, p, "text_completion")
	b = append(b, `"system_fingerprint":"fp_stub","choices":[{"text":`...)
	b = appendString(b, p.text)
	b = append(b, `,"index":0,"logprobs":null,"finish_reason":"`...)
	b = append(b, p.finishReason()...)
	b = append(b, `"}],"usage":`...)
	b = openAIUsage(b, p)
	return append(b, '}')
}

// streamOpenAI answers a streaming chat or completions request: a role
// chunk (chat), one chunk per reply piece, a finish chunk, the usage chunk
// when stream_options.include_usage is true, and data: [DONE].
func streamOpenAI(sw *sse, p plan) {
	chat := p.req.Endpoint == llm.ChatCompletions
	object := "text_completion"
	if chat {
		object = "chat.completion.chunk"
	}
	var b []byte
	chunk := func(choice func([]byte) []byte) {
		b = openAIHead(b[:0], p, object)
		b = append(b, `"system_fingerprint":"fp_stub","choices":[`...)
		b = choice(b)
		b = append(b, ']')
		if p.req.IncludeUsage {
			b = append(b, `,"usage":null`...)
		}
		b = append(b, '}')
		sw.event("", b)
	}
	if chat && p.tool() {
		chunk(func(b []byte) []byte {
			b = append(b, `{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[`...)
			b = toolCall(b, p, "", true)
			return append(b, `],"refusal":null},"logprobs":null,"finish_reason":null}`...)
		})
	} else if chat {
		chunk(func(b []byte) []byte {
			return append(b, `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}`...)
		})
	}
	for _, piece := range p.pieces() {
		chunk(func(b []byte) []byte {
			if chat && p.tool() {
				b = append(b, `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`...)
				b = appendString(b, piece)
				return append(b, `}}]},"logprobs":null,"finish_reason":null}`...)
			}
			if chat {
				b = append(b, `{"index":0,"delta":{"content":`...)
				b = appendString(b, piece)
				return append(b, `},"logprobs":null,"finish_reason":null}`...)
			}
			b = append(b, `{"text":`...)
			b = appendString(b, piece)
			return append(b, `,"index":0,"logprobs":null,"finish_reason":null}`...)
		})
	}
	chunk(func(b []byte) []byte {
		if chat {
			b = append(b, `{"index":0,"delta":{},"logprobs":null,"finish_reason":"`...)
		} else {
			b = append(b, `{"text":"","index":0,"logprobs":null,"finish_reason":"`...)
		}
		return append(append(b, p.finishReason()...), `"}`...)
	})
	if p.req.IncludeUsage {
		b = openAIHead(b[:0], p, object)
		b = append(b, `"system_fingerprint":"fp_stub","choices":[],"usage":`...)
		b = openAIUsage(b, p)
		b = append(b, '}')
		sw.event("", b)
	}
	sw.event("", []byte("[DONE]"))
}

// embeddingDims is the length of the stub's embedding vectors unless the
// request sets "dimensions".
const embeddingDims = 8

// embeddingsBody is a /v1/embeddings answer: one vector per input
// (a string, a token array, or each element of an array of strings or of
// token arrays), floats or base64 as encoding_format asks.
func embeddingsBody(b []byte, p plan, body []byte) []byte {
	input := gjson.GetBytes(body, "input")
	n := 1
	if input.IsArray() {
		n = 0
		first := true
		tokens := false
		input.ForEach(func(_, v gjson.Result) bool {
			if first {
				tokens, first = v.Type == gjson.Number, false
			}
			n++
			return true
		})
		if tokens {
			n = 1
		}
	}
	dims := embeddingDims
	if d := gjson.GetBytes(body, "dimensions"); d.Type == gjson.Number && d.Num >= 1 && d.Num <= 4096 {
		dims = int(d.Num)
	}
	b64 := gjson.GetBytes(body, "encoding_format").Str == "base64"
	b = append(b, `{"object":"list","data":[`...)
	raw := make([]byte, 4*dims)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = appendInt(b, int64(i))
		b = append(b, `,"embedding":`...)
		if b64 {
			for d := 0; d < dims; d++ {
				binary.LittleEndian.PutUint32(raw[4*d:], math.Float32bits(component(p.id, i, d)))
			}
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, raw)
			b = append(b, '"')
		} else {
			b = append(b, '[')
			for d := 0; d < dims; d++ {
				if d > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendFloat(b, float64(component(p.id, i, d)), 'f', -1, 32)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = appendString(b, p.req.Model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = appendInt(b, p.prompt)
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, p.prompt)
	return append(b, `}}`...)
}

// component is a deterministic vector component in [-1, 1).
func component(id string, i, d int) float32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	h.Write([]byte{byte(i), byte(i >> 8), byte(d), byte(d >> 8)})
	return float32(int32(h.Sum32()%2_000_000)-1_000_000) / 1_000_000
}
