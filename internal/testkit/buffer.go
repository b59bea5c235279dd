package testkit

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that one goroutine writes while another reads
// it: a command's output or a server's log, read by the test.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
