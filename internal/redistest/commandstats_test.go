package redistest

import "testing"

// TestCommandStat reads a command's calls back from INFO commandstats.
func TestCommandStat(t *testing.T) {
	s := Start(t)
	if _, err := s.Do("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	if n := s.CommandStat(t, "incr", "calls"); n != 0 {
		t.Errorf("incr calls before any: %v", n)
	}
	for range 3 {
		if _, err := s.Do("INCR", "n"); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.CommandStat(t, "incr", "calls"); n != 3 {
		t.Errorf("incr calls = %v, want 3", n)
	}
	if n := s.CommandStat(t, "incr", "no_such_field"); n != 0 {
		t.Errorf("a field the line does not have = %v, want 0", n)
	}
}
