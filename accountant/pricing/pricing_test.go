package pricing

import (
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

func TestBuiltinRatesParse(t *testing.T) {
	for _, b := range builtin {
		for _, s := range []string{b.input, b.output, b.cached} {
			if dollars(s) < 0 {
				t.Errorf("builtin %s: rate %q does not parse", b.name, s)
			}
		}
	}
}

// TestSeedFigure pins the arithmetic behind seed 000's budget 429: with
// gpt-4o-mini at $0.15/M input and $0.60/M output, observed 0.0000126 is
// 8 prompt tokens and 19 completion tokens (1,200 + 11,400 nanodollars).
// The stub upstream answers that prompt with 20 completion tokens, which
// costs 13,200 nanodollars (0.0000132).
func TestSeedFigure(t *testing.T) {
	c := Default()
	for _, tc := range []struct {
		model string
		u     ledger.Usage
		want  int64
	}{
		{"gpt-4o-mini", ledger.Usage{Input: 8, Output: 19}, 12_600},
		{"gpt-4o-mini", ledger.Usage{Input: 8, Output: 20}, 13_200},
		{"gpt-4o-mini-2024-07-18", ledger.Usage{Input: 8, Output: 19}, 12_600},
		{"openai/gpt-4o-mini", ledger.Usage{Input: 8, Output: 19}, 12_600},
		// cached input at the cached rate: 4×0.15 + 4×0.075 = 0.9 µ$
		{"gpt-4o-mini", ledger.Usage{Input: 8, CachedInput: 4}, 900},
		// one token of gpt-4o-mini input is 150 nanodollars
		{"gpt-4o-mini", ledger.Usage{Input: 1}, 150},
		{"claude-3-5-haiku-latest", ledger.Usage{Input: 1000, Output: 1000}, 4_800_000},
		{"claude-sonnet-4-5-20250929", ledger.Usage{Input: 1_000_000}, 3_000_000_000},
		// reasoning is inside output for OpenAI: not billed twice
		{"o3", ledger.Usage{Input: 0, Output: 100, Reasoning: 80}, 800_000},
		// gpt-4o-2024-05-13 has its own price, not gpt-4o's
		{"gpt-4o-2024-05-13", ledger.Usage{Input: 1_000_000}, 5_000_000_000},
		{"gpt-4o-2024-08-06", ledger.Usage{Input: 1_000_000}, 2_500_000_000},
		// the completions endpoint's models: 1.50 and 2 per million
		{"gpt-3.5-turbo-instruct", ledger.Usage{Input: 1_000_000, Output: 1_000_000}, 3_500_000_000},
		{"babbage-002", ledger.Usage{Input: 1_000_000}, 400_000_000},
	} {
		got := c.Price(tc.model, tc.u)
		if got.Unpriced || got.Nanos != tc.want {
			t.Errorf("Price(%s, %+v) = %+v, want %d nanodollars", tc.model, tc.u, got, tc.want)
		}
	}
	if got := c.Price("mystery-model", ledger.Usage{Input: 10}); !got.Unpriced || got.Nanos != 0 {
		t.Errorf("unknown model: got %+v, want unpriced", got)
	}
}

func TestRoundHalfUpOncePerRow(t *testing.T) {
	c, err := Parse([]byte("models: {tiny: {input: 0.0004, output: 0.0001}}"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		u    ledger.Usage
		want int64
	}{
		{ledger.Usage{Input: 1}, 0},            // 0.4
		{ledger.Usage{Input: 1, Output: 1}, 1}, // 0.4 + 0.1 = 0.5: half up, once
		{ledger.Usage{Input: 3, Output: 3}, 2}, // 1.2 + 0.3 = 1.5
		{ledger.Usage{Input: 2, Output: 2}, 1}, // 1.0
	} {
		if got := c.Price("tiny", tc.u); got.Nanos != tc.want {
			t.Errorf("Price(tiny, %+v) = %d, want %d", tc.u, got.Nanos, tc.want)
		}
	}
}

func TestPriceRowPrefersServedModel(t *testing.T) {
	c := Default()
	r := &ledger.Row{Model: "gpt-4o", Served: "gpt-4o-mini-2024-07-18", Usage: ledger.Usage{Input: 8, Output: 19}}
	if got := c.PriceRow(r); got.Nanos != 12_600 || got.Model != "gpt-4o-mini" {
		t.Errorf("PriceRow = %+v", got)
	}
	r.Served = "something-else"
	if got := c.PriceRow(r); got.Model != "gpt-4o" {
		t.Errorf("PriceRow falls back to the requested model: %+v", got)
	}
}

func TestParseFile(t *testing.T) {
	c, err := Parse([]byte(`
models:
  gpt-4o-mini: { input: 0.30, output: 1.20 }
  acme-llm:
    input: 1
    output: 2
    cached_input: 0.5
    aliases: [acme-llm-v1]
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Price("gpt-4o-mini", ledger.Usage{Input: 1_000_000, CachedInput: 1_000_000}); got.Nanos != 300_000_000 {
		t.Errorf("override without cached_input bills cached at input: %+v", got)
	}
	if got := c.Price("acme-llm-v1", ledger.Usage{Input: 2_000_000, Output: 1_000_000, CachedInput: 1_000_000}); got.Nanos != 3_500_000_000 {
		t.Errorf("alias of a new model: %+v", got)
	}
	if got := c.Price("gpt-4o", ledger.Usage{Input: 1_000_000}); got.Nanos != 2_500_000_000 {
		t.Errorf("built-ins stay: %+v", got)
	}
	// cached_input: 0 is a free prompt cache, not an omitted rate.
	free, err := Parse([]byte("models:\n  free-cache-llm: { input: 2, output: 4, cached_input: 0 }\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := free.Price("free-cache-llm", ledger.Usage{Input: 200, CachedInput: 100, Output: 10}); got.Nanos != 100*2000+10*4000 {
		t.Errorf("cached_input: 0 bills cached input: %+v, want %d", got, 100*2000+10*4000)
	}
	// A built-in model with no cached rate of its own bills cached input as
	// input.
	if got := c.Price("gpt-4o-2024-05-13", ledger.Usage{Input: 1_000_000, CachedInput: 1_000_000}); got.Nanos != 5_000_000_000 {
		t.Errorf("built-in without a cached rate: %+v", got)
	}
	// JSON is read by the same decoder.
	if _, err := Parse([]byte(`{"models":{"x":{"input":"0.000000001","output":0}}}`)); err != nil {
		t.Errorf("json: %v", err)
	}
}

// TestParseFileEmpty: an empty pricing file says what one holds (it
// printed "unreadable document: EOF").
func TestParseFileEmpty(t *testing.T) {
	for _, doc := range []string{"", "# prices\n", "[]\n"} {
		_, err := Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), "write models: { NAME: { input: DOLLARS, output: DOLLARS } }") || strings.Contains(err.Error(), "EOF") {
			t.Errorf("Parse(%q): %v", doc, err)
		}
	}
}

func TestParseFileErrors(t *testing.T) {
	_, err := Parse([]byte(`
models:
  a: { input: 0.1 }
  b: { input: -1, output: 1, colour: red }
  c: { input: 0.0000000001, output: 1 }
extra: 1
`))
	if err == nil {
		t.Fatal("want errors")
	}
	want := []string{
		`line 6: unknown key "extra" (the only top-level key is models)`,
		`line 3: models.a.output: required (dollars per million tokens)`,
		`line 4: models.b.input: -1 is negative; a rate is zero or more`,
		`line 4: models.b.colour: unknown key (known: input, output, cached_input, aliases)`,
		`line 5: models.c.input: 0.0000000001 has more than 9 decimal places`,
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
}

func TestParseFileAmbiguousNames(t *testing.T) {
	_, err := Parse([]byte(`
models:
  baz:         { input: 100, output: 200, aliases: [gpt-4o] }
  gpt-4o-mini: { input: 1, output: 2 }
  GPT-4o-mini: { input: 3, output: 4 }
  acme-llm:    { input: 1, output: 2, aliases: [acme-llm-v1, gpt-4o-mini] }
  other:       { input: 1, output: 2, aliases: [Acme-LLM-v1, o1-preview] }
`))
	if err == nil {
		t.Fatal("want errors for a duplicate model and colliding aliases")
	}
	want := []string{
		`line 3: models.baz.aliases: alias "gpt-4o" is the name of a built-in model; the built-in entry wins and the alias would be silently ignored, so to reprice gpt-4o give it its own entry under models`,
		`line 5: models.GPT-4o-mini: model "GPT-4o-mini" is already listed on line 4; one of the two would be silently ignored, so keep a single entry with the rates you mean`,
		`line 6: models.acme-llm.aliases: alias "gpt-4o-mini" is also the name of the model on line 4; the model's own entry wins and the alias would be silently ignored, so drop the alias or the entry`,
		`line 7: models.other.aliases: alias "Acme-LLM-v1" is also an alias of models.acme-llm on line 6; an alias names one model, so keep it under one of the two`,
		`line 7: models.other.aliases: alias "o1-preview" is a built-in alias of o1; to price o1-preview apart from o1 give it its own entry under models instead of an alias`,
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != len(want) {
		t.Errorf("%d problems, want %d:\n%v", n, len(want), err)
	}

	// Repricing a built-in alias with an entry of its own, restating a
	// built-in model's own aliases, and an alias listed twice under one
	// model stay accepted.
	c, err := Parse([]byte(`
models:
  o1-preview: { input: 1, output: 2 }
  gpt-4:      { input: 3, output: 4, aliases: [gpt-4-0613, gpt-4-0613] }
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Price("o1-preview", ledger.Usage{Input: 1_000_000}); got.Nanos != 1_000_000_000 {
		t.Errorf("o1-preview entry: %+v", got)
	}
	if got := c.Price("gpt-4-0613", ledger.Usage{Input: 1_000_000}); got.Nanos != 3_000_000_000 {
		t.Errorf("gpt-4 alias: %+v", got)
	}
}

// Table lists every model name and alias with the rates Lookup gives it,
// including a file entry that reprices a built-in alias on its own.
func TestTable(t *testing.T) {
	c, err := Parse([]byte("models: {claude-3-5-haiku-20241022: {input: 0.5, output: 2}, acme: {input: 1, output: 2, aliases: [Acme-V1]}}"))
	if err != nil {
		t.Fatal(err)
	}
	tab := c.Table()
	n := 0
	for _, m := range c.Models() {
		n += 1 + len(m.Aliases)
		for _, name := range append([]string{m.Name}, m.Aliases...) {
			if _, ok := tab[strings.ToLower(name)]; !ok {
				t.Errorf("%s is not in the table", name)
			}
		}
	}
	if len(tab) == 0 || len(tab) > n {
		t.Errorf("table has %d names, catalog %d names and aliases", len(tab), n)
	}
	for name, r := range tab {
		m, ok := c.Lookup(name)
		if !ok || m.Rates != r {
			t.Errorf("table[%s] = %+v, Lookup = %+v %v", name, r, m, ok)
		}
	}
	if r := tab["claude-3-5-haiku-20241022"]; r.Input != 500_000_000 {
		t.Errorf("repriced alias: %+v", r)
	}
	if r := tab["acme-v1"]; r.Output != 2_000_000_000 {
		t.Errorf("file alias: %+v", r)
	}
}
