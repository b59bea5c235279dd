// Package pricing owns the model price catalog of the accountant: a
// built-in table of current OpenAI and Anthropic models (dollars per million
// input, output and cached input tokens, with their aliases), extended or
// overridden by an operator's file, and the exact arithmetic that turns a
// ledger row's usage into integer nanodollars.
//
// Rates are held as nanodollars per million tokens, so every rate a price
// list states in dollars with up to nine decimals is exact. A row's cost is
//
//	(uncached_input × input + cached_input × cached + output × output) / 1e6
//
// computed in 128-bit integers and rounded half up once per row (never per
// term), so a row of 8 input and 19 output tokens of gpt-4o-mini
// ($0.15/M in, $0.60/M out) costs exactly 12,600 nanodollars.
//
// A model the catalog does not know is UNPRICED: Price reports it as such and
// never returns a silent zero.
package pricing

import (
	"sort"
	"strings"

	shared "github.com/tokentriage/tokentriage/shared/pricing"
)

// Rates are the prices of one model in nanodollars per million tokens.
type Rates = shared.Rates

// Model is one catalog entry.
type Model struct {
	Name    string
	Rates   Rates
	Aliases []string
}

// Catalog maps model names and aliases to rates. A Catalog is immutable once
// built and safe for concurrent use.
type Catalog struct {
	models map[string]*Model // canonical name → model
	alias  map[string]string // alias → canonical name
}

// Lookup returns the model a requested or served model name prices as, and
// whether there is one, by shared/pricing's rules (exact name or alias, then
// without a date suffix, without "-latest", without a "provider/" prefix;
// case ignored), the rules the filter applies to the prices it syncs.
func (c *Catalog) Lookup(name string) (*Model, bool) {
	if c == nil {
		return nil, false
	}
	return shared.Lookup(name, c.exact)
}

func (c *Catalog) exact(n string) (*Model, bool) {
	if m, ok := c.models[n]; ok {
		return m, true
	}
	if canon, ok := c.alias[n]; ok {
		m, ok := c.models[canon]
		return m, ok
	}
	return nil, false
}

// Models lists the catalog's entries by name.
func (c *Catalog) Models() []Model {
	out := make([]Model, 0, len(c.models))
	for _, m := range c.models {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Table returns the rates of every name the catalog knows exactly, each
// model's name and each alias (lowercase), as the catalog's exact lookup
// answers for it: a file entry named like a built-in alias reprices that
// name, and an alias names the last model that claimed it. Applying
// shared/pricing.Lookup's rules to the table finds, for any name, the rates
// Lookup finds; the filter prices with the table it syncs. The map is new
// on every call.
func (c *Catalog) Table() map[string]Rates {
	if c == nil {
		return map[string]Rates{}
	}
	out := make(map[string]Rates, len(c.models)+len(c.alias))
	for n := range c.alias {
		if m, ok := c.exact(n); ok {
			out[n] = m.Rates
		}
	}
	for n, m := range c.models {
		out[n] = m.Rates
	}
	return out
}

// newCatalog builds a catalog from entries; a later entry with the same name
// replaces an earlier one, and an alias names the last model that claimed it.
func newCatalog(entries []Model) *Catalog {
	c := &Catalog{models: make(map[string]*Model, len(entries)), alias: map[string]string{}}
	for _, e := range entries {
		c.add(e)
	}
	return c
}

func (c *Catalog) add(e Model) {
	e.Name = strings.ToLower(e.Name)
	if prev, ok := c.models[e.Name]; ok && len(e.Aliases) == 0 {
		e.Aliases = prev.Aliases
	}
	m := e
	c.models[m.Name] = &m
	for _, a := range m.Aliases {
		c.alias[strings.ToLower(a)] = m.Name
	}
}
