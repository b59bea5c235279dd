package filter

import (
	"strings"

	"github.com/tokentriage/tokentriage/shared/llm"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// maxJSONCopy caps the copy of a non-streaming JSON response kept for its
// usage; a larger response is scanned for it as it passes (UsageScanner).
const maxJSONCopy = 8 << 20

// ResponseHead is what the response headers callback decides.
type ResponseHead struct {
	// Add are headers to add to the response; the engine's scratch, valid
	// until its next callback.
	Add [][2]string
	// RemoveContentLength is set when the filter may change the body's
	// length (it strips a usage chunk it caused).
	RemoveContentLength bool
	// WantBody asks for the response body chunks.
	WantBody bool
}

// ResponseHeaders handles the response headers: the request id on every
// response, the disclosure headers on served ones, and the choice of how
// usage will be read (SSE scanner or a copy of the JSON body).
func (e *Engine) ResponseHeaders(s *Stream, status int, contentType, contentEncoding string) ResponseHead {
	s.status = status
	s.respSeen = true
	var h ResponseHead
	if s.replied {
		return h // a local reply carries its own headers
	}
	h.Add = append(e.addScratch[:0], [2]string{wire.HeaderRequestID, s.id})
	if s.unarmed {
		h.Add = append(h.Add, [2]string{HeaderGovernance, "unarmed"})
	} else if len(s.suspended) > 0 {
		h.Add = append(h.Add, [2]string{HeaderSuspended, strings.Join(s.suspended, ",")})
	}
	if s.fb.served() {
		h.Add = append(h.Add, [2]string{wire.HeaderFallback, s.fb.limitID + ";model=" + s.fb.model})
	}
	if e.plan != nil && e.plan.DiscloseLimits && !s.unarmed {
		h.Add = s.disclosure.AppendHeaders(h.Add)
	}
	e.addScratch = h.Add[:0]
	if s.modelScope != nil && status == 200 && s.method == "GET" {
		// A model list for a scoped key: held whole, then filtered.
		s.holdBody = true
		s.listReadable = contentEncoding == "" || contentEncoding == "identity"
		h.RemoveContentLength, h.WantBody = true, true
		return h
	}
	if !s.governs || !s.parsed {
		return h
	}
	if contentEncoding != "" && contentEncoding != "identity" {
		// Compressed although the filter asked for no encoding: its usage
		// cannot be read here, so the request settles on an estimate.
		return h
	}
	switch {
	case strings.HasPrefix(contentType, "text/event-stream"):
		if s.sse == nil {
			if s.scanner == nil {
				s.scanner = llm.NewStreamScanner(s.path, s.stripUsage)
			} else {
				s.scanner.Reset(s.path, s.stripUsage)
			}
			s.sse = s.scanner
		}
		s.sse.SetPromptBytes(s.req.PromptBytes)
		h.RemoveContentLength = s.stripUsage
		h.WantBody = true
	default:
		h.WantBody = true // JSON, or an error body: keep a bounded copy
	}
	return h
}

// Headers the filter adds beyond the seeds' set.
const (
	// HeaderSuspended lists limits that could not be checked and were
	// admitted (fail: open).
	HeaderSuspended = "X-Tt-Suspended"
	// HeaderGovernance says "unarmed" while no plan is in force yet.
	HeaderGovernance = "X-Tt-Governance"
)

// ResponseBody handles one response body chunk. It returns the bytes to
// send instead of chunk, and whether they differ from it.
//
// A held body (HoldsResponseBody) is handed over whole, once, at its end:
// the binding pauses the response until then, so the host buffers it.
func (e *Engine) ResponseBody(s *Stream, chunk []byte, eos bool) ([]byte, bool) {
	if eos {
		s.respDone = true
	}
	if s.holdBody {
		if !eos {
			return chunk, false
		}
		return modelListBody(s, chunk, s.listReadable), true
	}
	if s.sse != nil {
		// Unchanged chunks (all of them unless the usage chunk is
		// stripped) are neither copied nor compared.
		out, changed := s.sse.Pass(chunk, eos, s.out[:0])
		if changed && len(out) > 0 && (len(chunk) == 0 || &out[0] != &chunk[0]) {
			s.out = out // a copy: keep its buffer for the next chunk
		}
		return out, changed
	}
	if !s.jsonOver {
		if len(s.jsonBody)+len(chunk) <= maxJSONCopy {
			s.jsonBody = append(s.jsonBody, chunk...)
			return chunk, false
		}
		// Past the copy cap: the rest is scanned for its usage as it
		// passes (the usage follows the generated text), and the copy is
		// let go.
		s.jsonOver = true
		if s.bigJSON == nil {
			s.bigJSON = new(llm.UsageScanner)
		} else {
			s.bigJSON.Reset()
		}
		s.bigJSON.Feed(s.jsonBody)
		s.jsonBody = nil
	}
	s.bigJSON.Feed(chunk)
	return chunk, false
}

// HoldsResponseBody reports whether the response body is held until it is
// complete (the binding pauses each earlier chunk, and hands the whole
// buffered body to ResponseBody at the end).
func (s *Stream) HoldsResponseBody() bool { return s.holdBody }
