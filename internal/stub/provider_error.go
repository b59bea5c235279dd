package stub

import (
	"net/http"

	"github.com/tokentriage/tokentriage/shared/llm"
)

// writeError answers with status and an error body in the provider's
// shape: Anthropic's for /v1/messages, OpenAI's for everything else.
func writeError(w http.ResponseWriter, ep llm.Endpoint, status int, message string) {
	var b []byte
	if ep == llm.Messages {
		b = append(b, `{"type":"error","error":{"type":`...)
		b = appendString(b, anthropicErrorType(status))
		b = append(b, `,"message":`...)
		b = appendString(b, message)
		b = append(b, `}}`...)
	} else {
		typ, code := openAIErrorType(status)
		b = append(b, `{"error":{"message":`...)
		b = appendString(b, message)
		b = append(b, `,"type":`...)
		b = appendString(b, typ)
		b = append(b, `,"param":null,"code":`...)
		if code == "" {
			b = append(b, "null"...)
		} else {
			b = appendString(b, code)
		}
		b = append(b, `}}`...)
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, ep, status, b, "")
}

func writeJSON(w http.ResponseWriter, ep llm.Endpoint, status int, body []byte, id string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if id != "" {
		if ep == llm.Messages {
			h.Set("Request-Id", "req_stub"+id)
		} else {
			h.Set("X-Request-Id", "req_stub"+id)
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// openAIErrorType is OpenAI's error.type and error.code for a status.
func openAIErrorType(status int) (typ, code string) {
	switch status {
	case http.StatusUnauthorized:
		return "invalid_request_error", "invalid_api_key"
	case http.StatusForbidden:
		return "permission_error", ""
	case http.StatusNotFound:
		return "invalid_request_error", "unknown_url"
	case http.StatusTooManyRequests:
		return "rate_limit_error", "rate_limit_exceeded"
	}
	if status >= 500 {
		return "server_error", ""
	}
	return "invalid_request_error", ""
}

// anthropicErrorType is Anthropic's error.type for a status.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}
