// Package abi holds the proxy-wasm ABI v0.2.1 vocabulary shared by the
// binding and its native stand-in: the status, buffer, map, stream, log
// level and metric enums, the header map pair format and the property path
// format. It owns no state and makes no host calls.
package abi

// Status is a proxy_status_t returned by every host call.
type Status = uint32

// Statuses (spec "Types"; the same numbers as Envoy's WasmResult).
const (
	StatusOK                  Status = 0
	StatusNotFound            Status = 1
	StatusBadArgument         Status = 2
	StatusSerializationFailed Status = 3
	StatusParseFailure        Status = 4
	StatusInvalidMemoryAccess Status = 6
	StatusEmpty               Status = 7
	StatusCasMismatch         Status = 8
	StatusInternalFailure     Status = 10
	StatusBrokenConnection    Status = 11
	StatusUnimplemented       Status = 12
)

// Buffer types for proxy_get_buffer_bytes and friends.
const (
	BufferHttpRequestBody      uint32 = 0
	BufferHttpResponseBody     uint32 = 1
	BufferDownstreamData       uint32 = 2
	BufferUpstreamData         uint32 = 3
	BufferHttpCallResponseBody uint32 = 4
	BufferGrpcReceive          uint32 = 5
	BufferVMConfiguration      uint32 = 6
	BufferPluginConfiguration  uint32 = 7
	BufferCallData             uint32 = 8
)

// Header map types.
const (
	MapHttpRequestHeaders       uint32 = 0
	MapHttpRequestTrailers      uint32 = 1
	MapHttpResponseHeaders      uint32 = 2
	MapHttpResponseTrailers     uint32 = 3
	MapGrpcInitialMetadata      uint32 = 4
	MapGrpcTrailingMetadata     uint32 = 5
	MapHttpCallResponseHeaders  uint32 = 6
	MapHttpCallResponseTrailers uint32 = 7
)

// Stream types for proxy_continue_stream and proxy_close_stream.
const (
	StreamRequest    uint32 = 0
	StreamResponse   uint32 = 1
	StreamDownstream uint32 = 2
	StreamUpstream   uint32 = 3
)

// Log levels.
const (
	LogTrace    uint32 = 0
	LogDebug    uint32 = 1
	LogInfo     uint32 = 2
	LogWarn     uint32 = 3
	LogError    uint32 = 4
	LogCritical uint32 = 5
)

// Metric types.
const (
	MetricCounter   uint32 = 0
	MetricGauge     uint32 = 1
	MetricHistogram uint32 = 2
)

// Actions returned by the HTTP callbacks.
const (
	ActionContinue uint32 = 0
	ActionPause    uint32 = 1
)

// Limits the host applies to guest-supplied maps (cpp-host limits.h).
const (
	MaxPairsBytes = 1 << 20
	MaxPairs      = 1024
)
