package wasmtest

import (
	"fmt"
	"regexp"
	"sort"
)

// StatTag is one of Envoy's stats_config.stats_tags: a regex whose first
// capture group is cut out of a stat's name and whose second (or, with only
// one, the first) is the value of the tag Name. Envoy applies every tag
// regex to every stat name; so does Stats.
type StatTag struct {
	Name  string
	Regex string
}

type statTag struct {
	name string
	re   *regexp.Regexp
}

func compileStatTags(tags []StatTag) ([]statTag, error) {
	out := make([]statTag, 0, len(tags))
	for i, t := range tags {
		re, err := regexp.Compile(t.Regex)
		if err != nil {
			return nil, fmt.Errorf("wasmtest: Config.StatTags[%d] (%s): %w", i, t.Name, err)
		}
		if t.Name == "" || re.NumSubexp() < 1 {
			return nil, fmt.Errorf("wasmtest: Config.StatTags[%d] (%s): needs a name and a regex with a capture group (the part cut from the name)", i, t.Name)
		}
		out = append(out, statTag{t.Name, re})
	}
	return out, nil
}

// Stat is one of the plugin's stats as Envoy's /stats/prometheus shows it:
// its name with the tags cut out (Name), the tags, its kind ("counter" or
// "gauge") and value. Histograms are left out.
type Stat struct {
	Name  string
	Tags  [][2]string
	Kind  string
	Value int64
}

// Stats returns the plugin's counters and gauges, sorted by name, after the
// tag extraction of Config.StatTags.
func (h *Host) Stats() []Stat {
	h.metrics.mu.Lock()
	ms := make([]*metric, 0, len(h.metrics.m))
	for _, m := range h.metrics.m {
		if m.kind != metricHistogram {
			ms = append(ms, m)
		}
	}
	h.metrics.mu.Unlock()
	out := make([]Stat, 0, len(ms))
	for _, m := range ms {
		st := Stat{Name: m.name, Kind: "counter", Value: m.value.Load()}
		if m.kind == metricGauge {
			st.Kind = "gauge"
		}
		st.Name, st.Tags = extractTags(m.name, h.statTags)
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return fmt.Sprint(out[i].Tags) < fmt.Sprint(out[j].Tags)
	})
	return out
}

// extractTags applies the tag regexes in order, as Envoy's tag extractors
// do: each that matches cuts its first group out of the name and gives its
// tag the value of its second.
func extractTags(name string, tags []statTag) (string, [][2]string) {
	var out [][2]string
	for _, t := range tags {
		m := t.re.FindStringSubmatchIndex(name)
		if m == nil || m[2] < 0 {
			continue
		}
		val := name[m[2]:m[3]]
		if len(m) >= 6 && m[4] >= 0 {
			val = name[m[4]:m[5]]
		}
		out = append(out, [2]string{t.name, val})
		name = name[:m[2]] + name[m[3]:]
	}
	return name, out
}

// ExtractTags applies tag rules to one stat name as Envoy's tag extractors
// do (see StatTag), for checking a config's stats_tags against the names a
// filter defines.
func ExtractTags(name string, tags []StatTag) (string, [][2]string, error) {
	ts, err := compileStatTags(tags)
	if err != nil {
		return "", nil, err
	}
	n, out := extractTags(name, ts)
	return n, out, nil
}
