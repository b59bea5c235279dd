package wire

import (
	"github.com/tokentriage/tokentriage/shared/jsontok"
	"strconv"
	"time"
)

// Shape is the form of the body of a response the gateway answers itself
// (a refusal or a rejection). Whatever the shape, the headers are the same,
// and so are the members of our own (refused_by, enforcement).
type Shape uint8

const (
	// ShapeSeed is seed 000's body, {"error":{"type":…,"message":…,…}}:
	// the default on OpenAI paths, byte for byte what the seeds print.
	ShapeSeed Shape = iota
	// ShapeOpenAI is ShapeSeed with OpenAI's param and code members after
	// the message (governance.refusals.shape: provider), for clients that
	// branch on error.code.
	ShapeOpenAI
	// ShapeAnthropic is Anthropic's envelope,
	// {"type":"error","error":{"type":…,"message":…},"request_id":…}, with
	// Anthropic's type names; our error.type rides in
	// error.details.error_code, and refused_by and enforcement inside
	// error. Every refusal on an Anthropic endpoint has it.
	ShapeAnthropic
)

// Headers the gateway adds to every response it answers itself, for the
// official SDKs: the OpenAI and Anthropic SDKs (Go, Python, Node) obey
// X-Should-Retry over the status, read the wait from Retry-After-Ms before
// Retry-After, and show X-Request-Id (OpenAI) and Request-Id (Anthropic)
// as the error's request id.
const (
	HeaderShouldRetry  = "X-Should-Retry"
	HeaderRetryAfterMs = "Retry-After-Ms"
	HeaderXRequestID   = "X-Request-Id"
	HeaderSDKRequestID = "Request-Id"
)

// MaxRetryWait bounds the wait after which a refusal tells clients to
// retry (X-Should-Retry: true): the wait must be shorter. The SDKs honour a
// server's wait only below about a minute (the Node SDKs below 60 s, the
// Python SDKs up to 60 s, otherwise both back off for at most 8 s and
// retry into the same refusal; openai-go gives up past 2 minutes;
// anthropic-sdk-go sleeps for any wait): a refusal that cannot clear
// within a minute says false, so no SDK retries it, sleeps on it, or
// hammers it.
const MaxRetryWait = time.Minute

// appendSDKHeaders appends the retry verdict and the two request id
// headers the SDKs read, the same id as X-Tt-Request-Id.
func appendSDKHeaders(dst [][2]string, retry bool, requestID string) [][2]string {
	v := "false"
	if retry {
		v = "true"
	}
	dst = append(dst, [2]string{HeaderShouldRetry, v})
	if requestID != "" {
		dst = append(dst, [2]string{HeaderXRequestID, requestID}, [2]string{HeaderSDKRequestID, requestID})
	}
	return dst
}

// RequestIDHeaders appends X-Tt-Request-Id and the two request id headers
// the SDKs read, for a response the gateway answers itself that is not a
// refusal (/tt/v1/me, /v1/models).
func RequestIDHeaders(dst [][2]string, requestID string) [][2]string {
	return append(dst, [2]string{HeaderRequestID, requestID}, [2]string{HeaderXRequestID, requestID}, [2]string{HeaderSDKRequestID, requestID})
}

// anthropicType is Anthropic's error.type for a status
// (https://docs.anthropic.com/en/api/errors).
func anthropicType(status int) string {
	switch status {
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// openAICode is OpenAI's error.code for one of our error.type values: the
// code OpenAI itself answers in the same situation, or, where OpenAI has
// none, our own type.
func openAICode(errorType string) string {
	switch errorType {
	case TypeRateLimited, TypeConcurrencyExceeded, TypeCostUnfittable:
		return "rate_limit_exceeded"
	case TypeBudgetExceeded, TypeQuotaExhausted:
		return "insufficient_quota"
	case TypeUnauthorized:
		return "invalid_api_key"
	case TypeNotFound:
		return "model_not_found"
	}
	return errorType
}

// A body opens with appendHead, the message, then appendTail:
//
//	seed:      {"error":{"type":T,"message":M
//	openai:    {"error":{"type":T,"message":M,"param":P,"code":C
//	anthropic: {"type":"error","error":{"type":A,"message":M,"details":{"error_code":T}
//
// then our own members, then appendClose.
func appendHead(dst []byte, shape Shape, status int, errorType string) []byte {
	if shape == ShapeAnthropic {
		dst = jsontok.AppendKeyString(dst, `{"type":"error","error":{"type":`, anthropicType(status))
	} else {
		dst = jsontok.AppendKeyString(dst, `{"error":{"type":`, errorType)
	}
	return append(dst, `,"message":`...)
}

// appendTail follows the message; param is the request member at fault
// (OpenAI's param), "" for null.
func appendTail(dst []byte, shape Shape, errorType, param string) []byte {
	switch shape {
	case ShapeAnthropic:
		dst = jsontok.AppendKeyString(dst, `,"details":{"error_code":`, errorType)
		dst = append(dst, '}')
	case ShapeOpenAI:
		dst = append(dst, `,"param":`...)
		if param == "" {
			dst = append(dst, "null"...)
		} else {
			dst = jsontok.AppendString(dst, param)
		}
		dst = jsontok.AppendKeyString(dst, `,"code":`, openAICode(errorType))
	}
	return dst
}

// appendClose closes what appendOpen opened (and what came after it inside
// error); Anthropic's envelope carries the request id as request_id.
func appendClose(dst []byte, shape Shape, requestID string) []byte {
	if shape != ShapeAnthropic {
		return append(dst, "}}"...)
	}
	dst = append(dst, `},"request_id":`...)
	if requestID == "" {
		dst = append(dst, "null"...)
	} else {
		dst = jsontok.AppendString(dst, requestID)
	}
	return append(dst, '}')
}

// appendMillis appends a wait rounded up to whole milliseconds, the unit of
// Retry-After-Ms (a client that waits as told is never early).
func appendMillis(dst []byte, d time.Duration) []byte {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return strconv.AppendInt(dst, max(ms, 0), 10)
}
