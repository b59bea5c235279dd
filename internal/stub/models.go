package stub

import (
	"net/http"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/shared/llm"
)

// modelsPath splits a /v1/models path: ok for the list (/v1/models) and
// for one model (/v1/models/{id}, id set), also under a route prefix.
func modelsPath(path string) (id string, ok bool) {
	path = strings.TrimSuffix(path, "/")
	if strings.HasSuffix(path, "/v1/models") {
		return "", true
	}
	i := strings.LastIndex(path, "/v1/models/")
	if i < 0 {
		return "", false
	}
	id = path[i+len("/v1/models/"):]
	return id, id != "" && !strings.Contains(id, "/")
}

// serveModels answers GET /v1/models and GET /v1/models/{id}: in
// Anthropic's shape when the client speaks Anthropic's API (it sends
// anthropic-version), in OpenAI's otherwise; a model the stub does not
// list is a 404.
func (s *Stub) serveModels(w http.ResponseWriter, r *http.Request, id string) {
	anthropic := r.Header.Get("Anthropic-Version") != ""
	ep := llm.Unknown
	if anthropic {
		ep = llm.Messages // Anthropic's error shape
	}
	if id != "" {
		for _, m := range s.models {
			if m == id {
				writeJSON(w, ep, http.StatusOK, appendModel(nil, m, anthropic), "")
				return
			}
		}
		writeError(w, ep, http.StatusNotFound, "stub: model "+id+" not found")
		return
	}
	var b []byte
	if anthropic {
		b = append(b, `{"data":[`...)
	} else {
		b = append(b, `{"object":"list","data":[`...)
	}
	for i, m := range s.models {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendModel(b, m, anthropic)
	}
	b = append(b, ']')
	if anthropic {
		b = append(b, `,"has_more":false,"first_id":`...)
		b = appendString(b, s.models[0])
		b = append(b, `,"last_id":`...)
		b = appendString(b, s.models[len(s.models)-1])
	}
	b = append(b, '}')
	writeJSON(w, ep, http.StatusOK, b, "")
}

// appendModel appends one model object: OpenAI's {id, object, created,
// owned_by} or Anthropic's {type, id, display_name, created_at}.
func appendModel(b []byte, m string, anthropic bool) []byte {
	if anthropic {
		b = append(b, `{"type":"model","id":`...)
		b = appendString(b, m)
		b = append(b, `,"display_name":`...)
		b = appendString(b, m)
		b = append(b, `,"created_at":"`...)
		b = time.Unix(Created, 0).UTC().AppendFormat(b, time.RFC3339)
		return append(b, `"}`...)
	}
	b = append(b, `{"id":`...)
	b = appendString(b, m)
	b = append(b, `,"object":"model","created":`...)
	b = appendInt(b, Created)
	return append(b, `,"owned_by":"tokentriage-stub"}`...)
}

// isCountTokens reports whether path is Anthropic's POST
// /v1/messages/count_tokens (also under a route prefix).
func isCountTokens(path string) bool {
	return strings.HasSuffix(strings.TrimSuffix(path, "/"), "/v1/messages/count_tokens")
}

// serveCountTokens answers count_tokens with the prompt tokens the stub
// would report for the same body on /v1/messages.
func serveCountTokens(w http.ResponseWriter, body []byte) {
	req, err := llm.ParseRequest(llm.Messages.String(), body)
	if err != nil {
		writeError(w, llm.Messages, http.StatusBadRequest, err.Error())
		return
	}
	b := append([]byte(`{"input_tokens":`), appendInt(nil, PromptTokens(req))...)
	writeJSON(w, llm.Messages, http.StatusOK, append(b, '}'), "")
}
