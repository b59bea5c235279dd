package stub

import (
	"net/http"
	"strings"

	"github.com/tokentriage/tokentriage/shared/llm"
)

func isModels(path string) bool {
	path = strings.TrimSuffix(path, "/")
	return strings.HasSuffix(path, "/v1/models")
}

// serveModels answers GET /v1/models in OpenAI's list shape.
func (s *Stub) serveModels(w http.ResponseWriter) {
	b := []byte(`{"object":"list","data":[`)
	for i, m := range s.models {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendString(b, m)
		b = append(b, `,"object":"model","created":`...)
		b = appendInt(b, Created)
		b = append(b, `,"owned_by":"tokentriage-stub"}`...)
	}
	b = append(b, "]}"...)
	writeJSON(w, llm.Unknown, http.StatusOK, b, "")
}
