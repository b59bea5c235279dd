package llm

import "strings"

// Endpoint is one of the five governed provider APIs.
type Endpoint uint8

const (
	// Unknown is any path that is not a governed LLM endpoint.
	Unknown Endpoint = iota
	// ChatCompletions is OpenAI POST /v1/chat/completions.
	ChatCompletions
	// Completions is OpenAI POST /v1/completions.
	Completions
	// Embeddings is OpenAI POST /v1/embeddings.
	Embeddings
	// Responses is OpenAI POST /v1/responses.
	Responses
	// Messages is Anthropic POST /v1/messages.
	Messages
)

// endpointPaths are the canonical paths, indexed by Endpoint.
var endpointPaths = [...]string{
	Unknown:         "",
	ChatCompletions: "/v1/chat/completions",
	Completions:     "/v1/completions",
	Embeddings:      "/v1/embeddings",
	Responses:       "/v1/responses",
	Messages:        "/v1/messages",
}

// String returns the canonical path of e ("/v1/chat/completions"), or ""
// for Unknown.
func (e Endpoint) String() string {
	if int(e) < len(endpointPaths) {
		return endpointPaths[e]
	}
	return ""
}

// Anthropic reports whether e speaks Anthropic's wire shapes.
func (e Endpoint) Anthropic() bool { return e == Messages }

// EndpointOf classifies a request path. The query string and one trailing
// slash are ignored, and the canonical path may sit under any prefix
// ("/openai/v1/chat/completions" is ChatCompletions). Paths below a
// canonical one ("/v1/messages/count_tokens", "/v1/responses/resp_1") are
// Unknown: they are not generation requests.
func EndpointOf(path string) Endpoint {
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	if len(path) > 1 && path[len(path)-1] == '/' {
		path = path[:len(path)-1]
	}
	for e := ChatCompletions; e <= Messages; e++ {
		p := endpointPaths[e]
		if strings.HasSuffix(path, p) {
			return e
		}
	}
	return Unknown
}
