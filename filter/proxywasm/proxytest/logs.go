package proxytest

import "github.com/tokentriage/tokentriage/filter/proxywasm"

// LogEntry is one proxy_log call.
type LogEntry struct {
	Level   proxywasm.LogLevel
	Message string
}

// GetLogs returns this VM's logs at level, oldest first.
func (e *Emulator) GetLogs(level proxywasm.LogLevel) []string {
	e.nv.Lock()
	defer e.nv.Unlock()
	var out []string
	for _, l := range e.h.logs {
		if l.Level == level {
			out = append(out, l.Message)
		}
	}
	return out
}

// GetAllLogs returns every log of this VM, oldest first.
func (e *Emulator) GetAllLogs() []LogEntry {
	e.nv.Lock()
	defer e.nv.Unlock()
	return append([]LogEntry(nil), e.h.logs...)
}

// GetTraceLogs returns the trace logs.
func (e *Emulator) GetTraceLogs() []string { return e.GetLogs(proxywasm.LogLevelTrace) }

// GetDebugLogs returns the debug logs.
func (e *Emulator) GetDebugLogs() []string { return e.GetLogs(proxywasm.LogLevelDebug) }

// GetInfoLogs returns the info logs.
func (e *Emulator) GetInfoLogs() []string { return e.GetLogs(proxywasm.LogLevelInfo) }

// GetWarnLogs returns the warn logs.
func (e *Emulator) GetWarnLogs() []string { return e.GetLogs(proxywasm.LogLevelWarn) }

// GetErrorLogs returns the error logs.
func (e *Emulator) GetErrorLogs() []string { return e.GetLogs(proxywasm.LogLevelError) }

// GetCriticalLogs returns the critical logs.
func (e *Emulator) GetCriticalLogs() []string { return e.GetLogs(proxywasm.LogLevelCritical) }

// maxLogs bounds the captured logs of one VM; older entries are dropped,
// so a long benchmark does not grow without bound.
const maxLogs = 10000
