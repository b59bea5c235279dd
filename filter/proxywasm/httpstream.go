package proxywasm

import "github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"

// SendHttpResponse answers the current HTTP stream's client with a local
// reply. The host sends it after the callback returns, and it passes
// through this filter's OnHttpResponseHeaders and OnHttpResponseBody. The
// callback should return types.ActionPause. gRPCStatus -1 means none.
func SendHttpResponse(statusCode uint32, headers [][2]string, body []byte, gRPCStatus int32) error {
	buf := abi.AppendPairs(takeScratch(), headers)
	st := hSendLocalResponse(statusCode, "", body, buf, gRPCStatus)
	keepScratch(buf)
	return statusToError(st)
}

// ResumeHttpRequest resumes a request paused by a callback's Pause. Envoy
// applies it after the current callback returns and then drops the request
// headers, body and trailers from the filter's reach.
func ResumeHttpRequest() error { return statusToError(hContinueStream(abi.StreamRequest)) }

// ResumeHttpResponse resumes a paused response.
func ResumeHttpResponse() error { return statusToError(hContinueStream(abi.StreamResponse)) }
