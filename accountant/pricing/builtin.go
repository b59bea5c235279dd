package pricing

import "github.com/tokentriage/tokentriage/shared/config"

// builtin is the default catalog: list prices of the providers' standard
// (non-batch) tiers in dollars per million tokens, as input, output and
// cached input. Dated snapshots and "-latest" names resolve to these through
// Lookup's suffix rules; a snapshot priced differently from its family is
// listed on its own (gpt-4o-2024-05-13). Anthropic's cache writes are not
// modelled (the ledger row carries no cache-write count). An operator's
// --pricing file overrides any entry and adds new ones.
var builtin = []struct {
	name                  string
	input, output, cached string
	aliases               []string
}{
	// OpenAI
	{name: "gpt-5", input: "1.25", output: "10", cached: "0.125", aliases: []string{"gpt-5-chat-latest"}},
	{name: "gpt-5.1", input: "1.25", output: "10", cached: "0.125", aliases: []string{"gpt-5.1-chat-latest"}},
	{name: "gpt-5-mini", input: "0.25", output: "2", cached: "0.025"},
	{name: "gpt-5-nano", input: "0.05", output: "0.40", cached: "0.005"},
	{name: "gpt-4.1", input: "2", output: "8", cached: "0.50"},
	{name: "gpt-4.1-mini", input: "0.40", output: "1.60", cached: "0.10"},
	{name: "gpt-4.1-nano", input: "0.10", output: "0.40", cached: "0.025"},
	{name: "gpt-4o", input: "2.50", output: "10", cached: "1.25"},
	{name: "gpt-4o-2024-05-13", input: "5", output: "15"},
	{name: "gpt-4o-mini", input: "0.15", output: "0.60", cached: "0.075"},
	{name: "chatgpt-4o-latest", input: "5", output: "15"},
	{name: "o1", input: "15", output: "60", cached: "7.50", aliases: []string{"o1-preview"}},
	{name: "o1-mini", input: "1.10", output: "4.40", cached: "0.55"},
	{name: "o3", input: "2", output: "8", cached: "0.50"},
	{name: "o3-mini", input: "1.10", output: "4.40", cached: "0.55"},
	{name: "o4-mini", input: "1.10", output: "4.40", cached: "0.275"},
	{name: "gpt-4-turbo", input: "10", output: "30", aliases: []string{"gpt-4-turbo-preview", "gpt-4-1106-preview", "gpt-4-0125-preview"}},
	{name: "gpt-4", input: "30", output: "60", aliases: []string{"gpt-4-0613"}},
	{name: "gpt-3.5-turbo", input: "0.50", output: "1.50", aliases: []string{"gpt-3.5-turbo-0125"}},
	{name: "gpt-3.5-turbo-instruct", input: "1.50", output: "2", aliases: []string{"gpt-3.5-turbo-instruct-0914"}},
	{name: "davinci-002", input: "2", output: "2"},
	{name: "babbage-002", input: "0.40", output: "0.40"},
	{name: "text-embedding-3-small", input: "0.02", output: "0"},
	{name: "text-embedding-3-large", input: "0.13", output: "0"},
	{name: "text-embedding-ada-002", input: "0.10", output: "0"},

	// Anthropic
	{name: "claude-opus-4-5", input: "5", output: "25", cached: "0.50", aliases: []string{"claude-opus-4-5-20251101"}},
	{name: "claude-opus-4-1", input: "15", output: "75", cached: "1.50", aliases: []string{"claude-opus-4-1-20250805"}},
	{name: "claude-opus-4", input: "15", output: "75", cached: "1.50", aliases: []string{"claude-opus-4-20250514", "claude-opus-4-0"}},
	{name: "claude-sonnet-4-5", input: "3", output: "15", cached: "0.30", aliases: []string{"claude-sonnet-4-5-20250929"}},
	{name: "claude-sonnet-4", input: "3", output: "15", cached: "0.30", aliases: []string{"claude-sonnet-4-20250514", "claude-sonnet-4-0"}},
	{name: "claude-3-7-sonnet", input: "3", output: "15", cached: "0.30", aliases: []string{"claude-3-7-sonnet-20250219"}},
	{name: "claude-3-5-sonnet", input: "3", output: "15", cached: "0.30", aliases: []string{"claude-3-5-sonnet-20241022", "claude-3-5-sonnet-20240620"}},
	{name: "claude-haiku-4-5", input: "1", output: "5", cached: "0.10", aliases: []string{"claude-haiku-4-5-20251001"}},
	{name: "claude-3-5-haiku", input: "0.80", output: "4", cached: "0.08", aliases: []string{"claude-3-5-haiku-20241022"}},
	{name: "claude-3-haiku", input: "0.25", output: "1.25", cached: "0.03", aliases: []string{"claude-3-haiku-20240307"}},
	{name: "claude-3-opus", input: "15", output: "75", cached: "1.50", aliases: []string{"claude-3-opus-20240229"}},
}

// Default returns the built-in catalog.
func Default() *Catalog {
	entries := make([]Model, 0, len(builtin))
	for _, b := range builtin {
		r := Rates{Input: dollars(b.input), Output: dollars(b.output), Cached: dollars(b.cached)}
		if b.cached == "" { // no cached rate: cached input is billed as input
			r.Cached = r.Input
		}
		entries = append(entries, Model{Name: b.name, Rates: r, Aliases: b.aliases})
	}
	return newCatalog(entries)
}

// dollars reads a built-in rate; the table is checked by a test, and an
// empty string is "no rate".
func dollars(s string) int64 {
	if s == "" {
		return 0
	}
	u, err := config.ParseUSD(s)
	if err != nil {
		return -1
	}
	return u.Nanos
}
