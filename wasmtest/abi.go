package wasmtest

// The proxy-wasm ABI v0.2.1 enumerations (shared/proxy-wasm.md 1.4).

// status is proxy_status_t.
type status = uint32

const (
	statusOK                  = 0
	statusNotFound            = 1
	statusBadArgument         = 2
	statusSerializationFailed = 3
	statusParseFailure        = 4
	statusInvalidMemoryAccess = 6
	statusEmpty               = 7
	statusCASMismatch         = 8
	statusInternalFailure     = 10
	statusBrokenConnection    = 11
	statusUnimplemented       = 12
)

// Buffer types.
const (
	bufRequestBody      = 0
	bufResponseBody     = 1
	bufDownstreamData   = 2
	bufUpstreamData     = 3
	bufCallResponseBody = 4
	bufGrpcMessage      = 5
	bufVMConfig         = 6
	bufPluginConfig     = 7
	bufCallData         = 8
	bufMax              = 8
)

// Header map types.
const (
	mapRequestHeaders      = 0
	mapRequestTrailers     = 1
	mapResponseHeaders     = 2
	mapResponseTrailers    = 3
	mapGrpcInitial         = 4
	mapGrpcTrailing        = 5
	mapCallResponseHeaders = 6
	mapCallResponseTrailer = 7
	mapMax                 = 7
)

// Stream types for proxy_continue_stream and proxy_close_stream.
const (
	streamRequest    = 0
	streamResponse   = 1
	streamDownstream = 2
	streamUpstream   = 3
)

// Filter actions returned by the HTTP callbacks.
const (
	actionContinue = 0
	actionPause    = 1
)

// Metric types.
const (
	metricCounter   = 0
	metricGauge     = 1
	metricHistogram = 2
)

// LogLevel is a proxy-wasm log level (TRACE 0 … CRITICAL 5).
type LogLevel uint32

// The proxy-wasm log levels.
const (
	LogTrace    LogLevel = 0
	LogDebug    LogLevel = 1
	LogInfo     LogLevel = 2
	LogWarn     LogLevel = 3
	LogError    LogLevel = 4
	LogCritical LogLevel = 5
)

var logLevelNames = [...]string{"trace", "debug", "info", "warn", "error", "critical"}

// String returns the level's lowercase name.
func (l LogLevel) String() string {
	if int(l) < len(logLevelNames) {
		return logLevelNames[l]
	}
	return "off"
}

// WASI errno values the host returns (Envoy's choices, shared/proxy-wasm.md 2.1).
const (
	errnoSuccess = 0
	errnoBadf    = 8
	errnoFault   = 21
	errnoInval   = 28
	errnoNoent   = 44
	errnoNosys   = 52
	errnoNotsup  = 58
)
