package stub

import "net/http"

// Recorded is one request as it reached the stub.
type Recorded struct {
	Method string
	// URI is the request target as sent (path and query).
	URI    string
	Header http.Header
	Body   []byte
}

func (s *Stub) record(r *http.Request, body []byte) {
	if len(s.history) == 0 {
		return
	}
	rec := Recorded{Method: r.Method, URI: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body}
	s.mu.Lock()
	s.history[s.next] = rec
	s.next++
	if s.next == len(s.history) {
		s.next, s.filled = 0, true
	}
	s.mu.Unlock()
}

// Requests returns the remembered requests, oldest first.
func (s *Stub) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Recorded
	if s.filled {
		out = append(out, s.history[s.next:]...)
	}
	return append(out, s.history[:s.next]...)
}

// Last returns the most recent request, if any was remembered.
func (s *Stub) Last() (Recorded, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.history) == 0 || (!s.filled && s.next == 0) {
		return Recorded{}, false
	}
	i := s.next - 1
	if i < 0 {
		i = len(s.history) - 1
	}
	return s.history[i], true
}

// Forget drops the remembered requests.
func (s *Stub) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.history)
	s.next, s.filled = 0, false
}
