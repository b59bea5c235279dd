package calendar

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"
)

//go:generate go run ../../internal/genzones -out zones_gen.go

// LoadZone returns the time zone named name, an IANA name such as
// "Europe/Berlin", from the package's table (zones_gen.go): each zone's
// current rule, the POSIX TZ string of Go's zone database (and, for the
// two zones whose future changes are listed rather than ruled, Morocco's,
// their whole file). "" and "UTC" are UTC. The rule is applied to every
// instant, past ones included: a period in a zone whose rules changed is
// computed with today's rules (see
// RATIONALE.md#why-does-the-filter-carry-its-own-time-zone-rules). The
// table is the same in the filter and the accountant, so both draw every
// boundary at the same instant. An unknown name is an error naming a close
// spelling when there is one.
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	rule, ok := ZoneRule(name)
	if !ok {
		if alt := closeZone(name); alt != "" {
			return nil, fmt.Errorf("unknown time zone %q (did you mean %q?)", name, alt)
		}
		return nil, fmt.Errorf("unknown time zone %q (an IANA name such as Europe/Berlin, America/New_York or UTC)", name)
	}
	data := tzif(rule)
	if f, ok := zoneFiles[name]; ok {
		data = []byte(f)
	}
	loc, err := time.LoadLocationFromTZData(name, data)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: its rule %q: %v", name, rule, err)
	}
	return loc, nil
}

// ZoneRule returns the POSIX TZ rule of the zone named name.
func ZoneRule(name string) (string, bool) {
	if name == "" || strings.ContainsAny(name, "\t\n") {
		return "", false
	}
	rules := zoneRules
	// Binary search over the sorted lines.
	lo, hi := 0, len(rules)
	for lo < hi {
		mid := lo + (hi-lo)/2
		start := strings.LastIndexByte(rules[:mid], '\n') + 1
		end := start + strings.IndexByte(rules[start:], '\n')
		zone, rule, _ := strings.Cut(rules[start:end], "\t")
		switch {
		case zone == name:
			return rule, true
		case zone < name:
			lo = end + 1
		default:
			hi = start
		}
	}
	return "", false
}

// Zones lists the names of the zones LoadZone knows, sorted.
func Zones() []string {
	out := make([]string, 0, 600)
	for line := range strings.SplitSeq(strings.TrimSuffix(zoneRules, "\n"), "\n") {
		zone, _, _ := strings.Cut(line, "\t")
		out = append(out, zone)
	}
	return out
}

// closeZone finds a zone whose name differs from name only in letter case
// or in '_' against ' ' ("europe/berlin", "America/New York").
func closeZone(name string) string {
	want := strings.ToLower(strings.ReplaceAll(name, " ", "_"))
	for _, z := range Zones() {
		if strings.ToLower(z) == want {
			return z
		}
	}
	return ""
}

// tzif is a TZif (version 2) file with no transitions, one local time type
// and rule as its footer: Go's time package applies the footer's rule to
// every instant after the last transition, which is every instant.
func tzif(rule string) []byte {
	const abbr = "LMT"
	b := make([]byte, 0, 2*(44+6+len(abbr)+1)+len(rule)+2)
	for v := 0; v < 2; v++ { // the version 1 block, then the version 2 one
		b = append(b, "TZif2"...)
		b = append(b, make([]byte, 15)...)
		// isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
		for _, n := range [6]uint32{0, 0, 0, 0, 1, uint32(len(abbr) + 1)} {
			b = binary.BigEndian.AppendUint32(b, n)
		}
		b = binary.BigEndian.AppendUint32(b, 0) // utoff
		b = append(b, 0, 0)                     // isdst, abbreviation index
		b = append(b, abbr...)
		b = append(b, 0)
	}
	b = append(b, '\n')
	b = append(b, rule...)
	return append(b, '\n')
}
