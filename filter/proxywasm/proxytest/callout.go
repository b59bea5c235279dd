package proxytest

import (
	"errors"
	"slices"
	"strconv"

	"github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"
)

// HttpCalloutAttribute is a pending proxy_http_call, as the host would
// send it (with content-length added for a body, as Envoy does).
type HttpCalloutAttribute struct {
	CalloutID uint32
	Upstream  string
	Headers   [][2]string
	Body      []byte
	Trailers  [][2]string
	// Timeout in milliseconds; 0 means none.
	Timeout uint32
}

type callResponse struct {
	headers, trailers [][2]string
	body              []byte
}

// HttpCall validates like Envoy's Context::httpCall: a known cluster (when
// Options.Clusters is set), :method, :path and :authority present, a
// non-negative timeout. Call ids are 4, 8, 12, … per VM.
func (h *vmHost) HttpCall(upstream string, headers, body, trailers []byte, timeoutMs uint32) (uint32, uint32) {
	h.hostCalls++
	if int32(timeoutMs) < 0 {
		return 0, abi.StatusBadArgument
	}
	if cl := h.proc.opts.Clusters; cl != nil && !slices.Contains(cl, upstream) {
		return 0, abi.StatusBadArgument
	}
	hs := decodeHostPairs(headers)
	for _, k := range [...]string{":method", ":path", ":authority"} {
		if _, ok := firstValue(hs, k); !ok {
			return 0, abi.StatusBadArgument
		}
	}
	if len(body) > 0 {
		hs = replaceKey(hs, "content-length", strconv.Itoa(len(body)))
	}
	if !h.rootAlive {
		return 0, abi.StatusInternalFailure
	}
	h.nextCall += 4
	id := h.nextCall
	h.callouts[id] = &HttpCalloutAttribute{
		CalloutID: id,
		Upstream:  upstream,
		Headers:   hs,
		Body:      clone(body),
		Trailers:  decodeHostPairs(trailers),
		Timeout:   timeoutMs,
	}
	return id, abi.StatusOK
}

// GetPendingHttpCalls returns the callouts waiting for an answer, oldest
// first.
func (e *Emulator) GetPendingHttpCalls() []HttpCalloutAttribute {
	e.nv.Lock()
	defer e.nv.Unlock()
	out := make([]HttpCalloutAttribute, 0, len(e.h.callouts))
	for _, c := range e.h.callouts {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b HttpCalloutAttribute) int { return int(a.CalloutID) - int(b.CalloutID) })
	return out
}

// CallOnHttpCallResponse answers a pending callout: the filter's callback
// runs (through proxy_on_http_call_response on the root context) with
// these headers (a :status 200 is added if missing), body and trailers.
func (e *Emulator) CallOnHttpCallResponse(calloutID uint32, headers, trailers [][2]string, body []byte) error {
	hs := lowerPairs(headers)
	if _, ok := firstValue(hs, ":status"); !ok {
		hs = append([][2]string{{":status", "200"}}, hs...)
	}
	return e.answer(calloutID, &callResponse{headers: hs, trailers: lowerPairs(trailers), body: clone(body)})
}

// FailHttpCall answers a pending callout as a reset: the callback runs
// with (0, 0, 0) and proxywasm.GetStatus reports 11, "reset".
func (e *Emulator) FailHttpCall(calloutID uint32) error { return e.answer(calloutID, nil) }

// TimeoutHttpCall answers a pending callout as Envoy's async client does
// when its timeout fires: a 504 with body "upstream request timeout".
func (e *Emulator) TimeoutHttpCall(calloutID uint32) error {
	body := []byte("upstream request timeout")
	return e.answer(calloutID, &callResponse{
		headers: [][2]string{{":status", "504"}, {"content-length", strconv.Itoa(len(body))}, {"content-type", "text/plain"}},
		body:    body,
	})
}

func (e *Emulator) answer(calloutID uint32, r *callResponse) error {
	e.nv.Enter()
	defer e.nv.Exit()
	h := e.h
	if _, ok := h.callouts[calloutID]; !ok {
		return errors.New("proxytest: no pending callout " + strconv.FormatUint(uint64(calloutID), 10) +
			": answer an id from GetPendingHttpCalls")
	}
	delete(h.callouts, calloutID)
	h.effective = h.rootID
	if r == nil {
		h.status, h.statusMsg = abi.StatusBrokenConnection, "reset"
		e.guest().OnHttpCallResponse(h.rootID, calloutID, 0, 0, 0)
		h.statusMsg = ""
	} else {
		h.status, h.statusMsg = abi.StatusOK, ""
		h.callResp = r
		e.guest().OnHttpCallResponse(h.rootID, calloutID, uint32(len(r.headers)), uint32(len(r.body)), uint32(len(r.trailers)))
		h.callResp = nil
	}
	h.effective = 0
	e.afterCall()
	return nil
}
