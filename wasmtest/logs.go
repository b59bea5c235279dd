package wasmtest

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// LogEntry is one line the guest logged (proxy_log, or stdout/stderr
// through fd_write), or one the host logged about a VM.
type LogEntry struct {
	// VM is the index of the VM: 0 the canary, 1… the workers.
	VM      int
	Level   LogLevel
	Message string
}

// logStore keeps the lines at or above the host's level, the most recent
// maxLogs of them, and copies each to an optional writer.
type logStore struct {
	level   LogLevel
	clock   Clock
	w       io.Writer
	max     int
	mu      sync.Mutex
	entries []LogEntry
	dropped int
}

func (s *logStore) log(v *vm, level LogLevel, msg string) {
	if level < s.level {
		return
	}
	s.add(v.index, v.name, level, msg)
}

func (s *logStore) add(index int, name string, level LogLevel, msg string) {
	if level < s.level {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max > 0 && len(s.entries) >= s.max {
		n := copy(s.entries, s.entries[len(s.entries)/2:])
		s.dropped += len(s.entries) - n
		s.entries = s.entries[:n]
	}
	s.entries = append(s.entries, LogEntry{VM: index, Level: level, Message: msg})
	if s.w != nil {
		fmt.Fprintf(s.w, "%s [%s] wasm log %s: %s\n", s.clock.Now().UTC().Format(time.RFC3339Nano), level, name, msg)
	}
}

func (s *logStore) snapshot() []LogEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]LogEntry(nil), s.entries...)
}

// recent returns the last n messages of one VM at or above level.
func (s *logStore) recent(index int, level LogLevel, n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for i := len(s.entries) - 1; i >= 0 && len(out) < n; i-- {
		e := s.entries[i]
		if e.VM == index && e.Level >= level {
			out = append([]string{e.Message}, out...)
		}
	}
	return out
}

// proxy_log(level, ptr, size)
func hostLog(v *vm, s []uint64) {
	level, p, n := uint32(s[0]), uint32(s[1]), uint32(s[2])
	if level > uint32(LogCritical) {
		s[0] = statusBadArgument
		return
	}
	if LogLevel(level) < v.h.logs.level {
		s[0] = statusOK
		return
	}
	b, ok := v.read(p, n)
	if !ok {
		s[0] = statusInvalidMemoryAccess
		return
	}
	v.h.logs.add(v.index, v.name, LogLevel(level), string(b))
	s[0] = statusOK
}

// proxy_get_log_level(ret): the host's level (ABI 0.2.1 only).
func hostGetLogLevel(v *vm, s []uint64) {
	if !v.putU32(uint32(s[0]), uint32(v.h.logs.level)) {
		s[0] = statusInvalidMemoryAccess
		return
	}
	s[0] = statusOK
}
