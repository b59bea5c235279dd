package main

import (
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// closest returns the candidates nearest to word by edit distance, when
// near enough to be a slip (at most a third of the word's length, and at
// least 1 and at most 3 edits), best first; or those word is a prefix
// of. Used for "did you mean" on unknown commands and flags.
func closest(word string, candidates []string) []string {
	type scored struct {
		s string
		d int
	}
	var out []scored
	limit := min(3, max(1, len(word)/3))
	for _, c := range candidates {
		d := editDistance(word, c)
		switch {
		case d <= limit:
			out = append(out, scored{c, d})
		case len(word) >= 3 && strings.HasPrefix(c, word):
			out = append(out, scored{c, limit + 1})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].d < out[j].d })
	var names []string
	for _, x := range out {
		if len(names) > 0 && x.d > out[0].d {
			break
		}
		names = append(names, x.s)
	}
	return names
}

// editDistance is the Levenshtein distance between a and b, by bytes,
// with a transposition of two neighbours counting as one edit.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// meanLine is "Did you mean ...?" for suggestions, "" for none.
func meanLine(suggestions []string) string {
	switch len(suggestions) {
	case 0:
		return ""
	case 1:
		return "Did you mean " + suggestions[0] + "?"
	}
	return "Did you mean one of " + strings.Join(suggestions, ", ") + "?"
}

// commandNames are the names an unknown command is compared with: every
// command, and the words that open a group of them.
func commandNames() []string {
	seen := map[string]bool{"help": true, "version": true}
	names := []string{"help", "version"}
	for _, c := range commands {
		for _, n := range []string{c.name, strings.Fields(c.name)[0]} {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	return names
}

// flagSuggestion reads an unknown flag from a pflag error and suggests the
// command's flags nearest to it.
func flagSuggestion(err error, fs *pflag.FlagSet) string {
	msg := err.Error()
	var name string
	switch {
	case strings.HasPrefix(msg, "unknown flag: --"):
		name = strings.TrimPrefix(msg, "unknown flag: --")
	case strings.HasPrefix(msg, "unknown shorthand flag: "):
		// unknown shorthand flag: 'x' in -xyz: a long flag typed with one dash?
		if _, rest, ok := strings.Cut(msg, " in -"); ok {
			name = rest
		}
	default:
		return ""
	}
	var flags []string
	fs.VisitAll(func(f *pflag.Flag) { flags = append(flags, f.Name) })
	s := closest(name, flags)
	for i := range s {
		s[i] = "--" + s[i]
	}
	return meanLine(s)
}
