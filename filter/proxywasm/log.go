package proxywasm

import (
	"fmt"

	"github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"
)

// LogLevel is a proxy-wasm log level. Envoy logs under its "wasm" logger;
// run it with e.g. --component-log-level wasm:info to see filter logs.
type LogLevel uint32

// Log levels, lowest first (the ABI's numbers).
const (
	LogLevelTrace    LogLevel = 0
	LogLevelDebug    LogLevel = 1
	LogLevelInfo     LogLevel = 2
	LogLevelWarn     LogLevel = 3
	LogLevelError    LogLevel = 4
	LogLevelCritical LogLevel = 5
)

var levelNames = [...]string{"trace", "debug", "info", "warn", "error", "critical"}

func (l LogLevel) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return "off"
}

// GetLogLevel returns the host's current level for the filter's logs
// (proxy_get_log_level; ABI 0.2.1 hosts only). Reading it once per tick and
// skipping expensive debug formatting below it saves a host call per log.
func GetLogLevel() (LogLevel, error) {
	l, st := hGetLogLevel()
	if st != abi.StatusOK {
		return 0, statusToError(st)
	}
	return LogLevel(l), nil
}

// LogTrace logs msg at trace level.
func LogTrace(msg string) { hLog(abi.LogTrace, msg) }

// LogDebug logs msg at debug level.
func LogDebug(msg string) { hLog(abi.LogDebug, msg) }

// LogInfo logs msg at info level.
func LogInfo(msg string) { hLog(abi.LogInfo, msg) }

// LogWarn logs msg at warn level.
func LogWarn(msg string) { hLog(abi.LogWarn, msg) }

// LogError logs msg at error level.
func LogError(msg string) { hLog(abi.LogError, msg) }

// LogCritical logs msg at critical level.
func LogCritical(msg string) { hLog(abi.LogCritical, msg) }

// LogTracef formats with fmt.Sprintf and logs at trace level. The f
// variants format even when the host drops the level: keep them off hot
// paths.
func LogTracef(format string, args ...any) { hLog(abi.LogTrace, fmt.Sprintf(format, args...)) }

// LogDebugf formats and logs at debug level.
func LogDebugf(format string, args ...any) { hLog(abi.LogDebug, fmt.Sprintf(format, args...)) }

// LogInfof formats and logs at info level.
func LogInfof(format string, args ...any) { hLog(abi.LogInfo, fmt.Sprintf(format, args...)) }

// LogWarnf formats and logs at warn level.
func LogWarnf(format string, args ...any) { hLog(abi.LogWarn, fmt.Sprintf(format, args...)) }

// LogErrorf formats and logs at error level.
func LogErrorf(format string, args ...any) { hLog(abi.LogError, fmt.Sprintf(format, args...)) }

// LogCriticalf formats and logs at critical level.
func LogCriticalf(format string, args ...any) {
	hLog(abi.LogCritical, fmt.Sprintf(format, args...))
}
