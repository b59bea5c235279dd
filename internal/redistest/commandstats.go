package redistest

import (
	"strconv"
	"strings"
	"testing"
)

// CommandStat is one field of cmd's line in INFO commandstats (calls,
// usec, usec_per_call, ...) since the server started or the last CONFIG
// RESETSTAT; 0 when the server has not run cmd.
func (s *Server) CommandStat(tb testing.TB, cmd, field string) float64 {
	tb.Helper()
	info, err := s.Do("INFO", "commandstats")
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":"); ok {
			for _, f := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(f, field+"="); ok {
					x, _ := strconv.ParseFloat(v, 64)
					return x
				}
			}
		}
	}
	return 0
}
