package proxywasm

import "github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"

// DispatchHttpCall sends an HTTP request to the cluster named cluster (an
// Envoy cluster, not a URL). headers must hold :method, :path and
// :authority. timeoutMillisecond 0 means no timeout. The host answers
// later: cb runs with the response's header count, body size and trailer
// count, as the context that made the call if that context still exists
// (through proxy_set_effective_context); it never runs for a stream that is
// gone or failed. numHeaders 0 means the call failed (GetStatus tells why);
// a timeout arrives as a 504. The response is readable only during cb.
func DispatchHttpCall(cluster string, headers [][2]string, body []byte, trailers [][2]string,
	timeoutMillisecond uint32, cb func(numHeaders, bodySize, numTrailers int)) (uint32, error) {
	return dispatch(cluster, headers, body, trailers, timeoutMillisecond, cb, false)
}

// DispatchHttpCallForPlugin is DispatchHttpCall whose answer runs cb as the
// plugin (root) context of the context that makes the call, never as the
// calling stream: a stream may make it and end at once (from
// OnHttpStreamDone) without the answer being lost. The host owns every
// callout by the root context anyway (Envoy's http_call takes the root of
// the effective context); this is the binding's bookkeeping of it.
func DispatchHttpCallForPlugin(cluster string, headers [][2]string, body []byte, trailers [][2]string,
	timeoutMillisecond uint32, cb func(numHeaders, bodySize, numTrailers int)) (uint32, error) {
	return dispatch(cluster, headers, body, trailers, timeoutMillisecond, cb, true)
}

func dispatch(cluster string, headers [][2]string, body []byte, trailers [][2]string,
	timeoutMillisecond uint32, cb func(numHeaders, bodySize, numTrailers int), forPlugin bool) (uint32, error) {
	buf := abi.AppendPairs(takeScratch(), headers)
	split := len(buf)
	buf = abi.AppendPairs(buf, trailers)
	id, st := hHttpCall(cluster, buf[:split], body, buf[split:], timeoutMillisecond)
	keepScratch(buf)
	if st != abi.StatusOK {
		return 0, statusToError(st)
	}
	if s := state(); s != nil {
		caller := s.active
		if forPlugin {
			caller = s.rootOf(s.active)
		}
		s.callouts[id] = callout{cb: cb, caller: caller, root: s.rootOf(s.active)}
	}
	return id, nil
}

// GetHttpCallResponseHeaders returns the callout response's headers
// (:status included). Only during a DispatchHttpCall callback.
func GetHttpCallResponseHeaders() ([][2]string, error) {
	return getMap(abi.MapHttpCallResponseHeaders)
}

// GetHttpCallResponseBody returns up to maxSize bytes of the callout
// response's body from start. Only during a DispatchHttpCall callback.
func GetHttpCallResponseBody(start, maxSize int) ([]byte, error) {
	return getBuffer(abi.BufferHttpCallResponseBody, start, maxSize, nil)
}

// GetHttpCallResponseTrailers returns the callout response's trailers.
func GetHttpCallResponseTrailers() ([][2]string, error) {
	return getMap(abi.MapHttpCallResponseTrailers)
}
