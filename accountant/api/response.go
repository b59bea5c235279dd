package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/tokentriage/tokentriage/accountant/runtime"
)

// ErrorBody is every error answer: {"error":{"type":…,"message":…}}. The
// message says what is wrong and what to do.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

var errNoReload = errors.New("this accountant does not support reload")

// maxBody caps a request body; management writes are small.
const maxBody = 1 << 20

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"type":"internal","message":"encoding the answer failed; see the accountant's log"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, typ, format string, args ...any) {
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Type: typ, Message: fmt.Sprintf(format, args...)}})
}

// writeRefusal answers a runtime error: a refused write with its status and
// reason, anything else as an internal error.
func (h *handler) writeRefusal(w http.ResponseWriter, r *http.Request, err error) {
	var e *runtime.Error
	if !errors.As(err, &e) {
		h.internal(w, r, err)
		return
	}
	switch e.Kind {
	case runtime.NotFound:
		writeError(w, http.StatusNotFound, "not_found", "%s", e.Reason)
	case runtime.Conflict:
		writeError(w, http.StatusConflict, "conflict", "%s", e.Reason)
	default:
		writeError(w, http.StatusBadRequest, "invalid_request", "%s", e.Reason)
	}
}

func (h *handler) internal(w http.ResponseWriter, r *http.Request, err error) {
	h.Logger.Error("management api: internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, "internal",
		"the accountant failed to serve %s %s; its log has the cause", r.Method, r.URL.Path)
}

// decodeBody reads a JSON body strictly: unknown fields, trailing data and
// bodies over 1 MiB are refused with a 400 that names the problem.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "reading the request body: %v", err)
		return false
	}
	if len(b) > maxBody {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", "the request body is over %d bytes; management writes are small JSON objects", maxBody)
		return false
	}
	if len(bytes.TrimSpace(b)) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request", "the request body is empty; %s %s takes a JSON object", r.Method, r.URL.Path)
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "the request body is not the JSON object this route takes: %v", err)
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "invalid_request", "the request body has data after its JSON object; send one object")
		return false
	}
	return true
}

// decodeOptionalBody is decodeBody for a route whose body may be left
// out: an empty body leaves v as it is.
func decodeOptionalBody(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "reading the request body: %v", err)
		return false
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return true
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return decodeBody(w, r, v)
}

// armed returns the plan armed now, or answers 503 when there is none.
func (h *handler) armed(w http.ResponseWriter) (runtime.Plan, bool) {
	a := h.Armed()
	if a == nil {
		writeError(w, http.StatusServiceUnavailable, "not_armed",
			"no governance plan is armed (the config did not compile); fix the config file and POST %sreload", Prefix)
		return nil, false
	}
	return runtime.ArmedPlan(a), true
}

// wrote logs a successful write and reports it to the accountant.
func (h *handler) wrote(p principal, action, target string) {
	h.Logger.Info("management api: write", "who", p.who, "action", action, "target", target)
	h.Changed()
}
