package accountant

import "github.com/tokentriage/tokentriage/accountant/core"

// CoreStats returns the running totals of the accountant's core: rows
// recorded, folded, refused by the upstream with nothing spent, folded
// into an overflow counter (a value past max_distinct), ...
func (s *Server) CoreStats() core.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.core.Stats()
}
