package llm

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tokentriage/tokentriage/shared/jsontok/jv"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// TestParseUsageGolden runs every testdata/usage/*.json through ParseUsage.
func TestParseUsageGolden(t *testing.T) {
	for _, fx := range fixtures(t, "usage", ".json") {
		file, body, path := fx.file, fx.body, fx.path
		u, model, ok := ParseUsage(path, body)
		var out strings.Builder
		fmt.Fprintf(&out, "POST %s\nok: %v\n", path, ok)
		if ok {
			js, _ := json.Marshal(u)
			fmt.Fprintf(&out, "usage: %s\nmodel_served: %s\n", js, model)
		}
		checkGolden(t, file, &out)
	}
}

func TestParseUsageMapping(t *testing.T) {
	for i, tc := range []struct {
		path, body string
		want       ledger.Usage
		model      string
		ok         bool
	}{
		{"/v1/chat/completions", `{"model":"m","usage":{"prompt_tokens":10,"completion_tokens":5}}`,
			ledger.Usage{Input: 10, Output: 5, Total: 15}, "m", true},
		{"/v1/embeddings", `{"usage":{"prompt_tokens":8,"total_tokens":8}}`,
			ledger.Usage{Input: 8, Total: 8}, "", true},
		{"/v1/messages", `{"model":"c","usage":{"input_tokens":3,"cache_read_input_tokens":100,"cache_creation_input_tokens":20,"output_tokens":7}}`,
			ledger.Usage{Input: 123, Output: 7, CachedInput: 100, Total: 130}, "c", true},
		{"/v1/responses", `{"usage":{"input_tokens":30,"input_tokens_details":{"cached_tokens":10},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":4},"total_tokens":39}}`,
			ledger.Usage{Input: 30, Output: 9, CachedInput: 10, Reasoning: 4, Total: 39}, "", true},
		{"/v1/chat/completions", `{"usage":{}}`, ledger.Usage{}, "", false},
		{"/v1/chat/completions", `{"usage":{"prompt_tokens":1,}}`, ledger.Usage{}, "", false},
		{"/v1/chat/completions", `[1,2]`, ledger.Usage{}, "", false},
		{"/v1/chat/completions", ``, ledger.Usage{}, "", false},
		{"/v1/models", `{"usage":{"prompt_tokens":1}}`, ledger.Usage{}, "", false},
		{"/v1/chat/completions", `{"usage":{"prompt_tokens":1e300,"completion_tokens":1e300}}`,
			ledger.Usage{Input: maxExactInt, Output: maxExactInt, Total: 2 * maxExactInt}, "", true},
	} {
		u, model, ok := ParseUsage(tc.path, []byte(tc.body))
		if u != tc.want || model != tc.model || ok != tc.ok {
			t.Errorf("case %d: ParseUsage(%s, %s) = %+v, %q, %v; want %+v, %q, %v", i, tc.path, tc.body, u, model, ok, tc.want, tc.model, tc.ok)
		}
	}
}

// TestFindUsageMatchesGJSON holds the one-pass reading of an answer's top
// level to gjson's iteration, on generated answers with usage and model
// repeated, misplaced, of every type, nested deep and mutated.
func TestFindUsageMatchesGJSON(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	usages := []string{`{"prompt_tokens":8,"completion_tokens":16,"total_tokens":24}`, `{"input_tokens":3,"output_tokens":4,"cache_read_input_tokens":2}`,
		`null`, `{"prompt_tokens":"8"}`, `{"total_tokens":1.5}`, `{}`, `[]`, `{"prompt_tokens_details":{"cached_tokens":3},"prompt_tokens":9}`}
	others := []string{`"chatcmpl-1"`, `[{"index":0,"message":{"role":"assistant","content":"Berlin is \"the\" capital.\n","refusal":null}}]`,
		`{"a":[1,2,{"b":"c"}],"usage":{"prompt_tokens":99}}`, `1e3`, `true`, `"caf\u00e9"`}
	took := 0
	for k := 0; k < 30000; k++ {
		var m []string
		for j := rng.Intn(6); j >= 0; j-- {
			switch rng.Intn(4) {
			case 0:
				m = append(m, `"usage":`+usages[rng.Intn(len(usages))])
			case 1:
				m = append(m, `"model":`+[]string{`"gpt-4o-mini"`, `""`, `7`, `"m\u0061"`}[rng.Intn(4)])
			default:
				m = append(m, `"`+[]string{"id", "choices", "object", "us\\u0061ge"}[rng.Intn(4)]+`":`+others[rng.Intn(len(others))])
			}
		}
		body := []byte(" {" + strings.Join(m, ", ") + "}\n")
		if k%3 == 0 {
			body[rng.Intn(len(body))] = `{}[]":,\ 0x`[rng.Intn(11)]
		}
		for _, ep := range []Endpoint{ChatCompletions, Messages} {
			c, served, have, sure := parseUsageFast(body)
			if !sure {
				continue
			}
			took++
			wu, wm, wok := parseUsageGJSON(ep, body)
			var gu ledger.Usage
			if have {
				gu = c.usage(ep)
			} else {
				served = ""
			}
			if have != wok || gu != wu || served != wm {
				t.Fatalf("%s %s: one pass %+v %q %v, gjson %+v %q %v", ep, body, gu, served, have, wu, wm, wok)
			}
		}
	}
	if took < 10000 {
		t.Fatalf("the one-pass reading took only %d answers", took)
	}
}

// countsCases are usage objects of every shape readCounts meets: plain,
// nested details, duplicates, nulls, signs, fractions, exponents, long
// numbers, escaped names, wrong types.
var countsCases = []string{
	`{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0}}`,
	`{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":2,"output_tokens":4,"service_tier":"standard"}`,
	`{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":7,"output_tokens_details":{"reasoning_tokens":5},"total_tokens":17}`,
	`{}`, `{ }`, `{"prompt_tokens":null}`, `{"prompt_tokens":null,"total_tokens":3}`, `{"total_tokens":1.5}`, `{"total_tokens":1.0}`,
	`{"total_tokens":1e3}`, `{"total_tokens":1E2,"prompt_tokens":2}`, `{"total_tokens":-0}`, `{"total_tokens":-1}`, `{"total_tokens":"3"}`,
	`{"total_tokens":true}`, `{"total_tokens":[1]}`, `{"total_tokens":{"a":1}}`, `{"total_tokens":123456789012345}`,
	`{"total_tokens":1234567890123456}`, `{"total_tokens":99999999999999999999}`, `{"tot\u0061l_tokens":3}`, `{"total_tokens":3,"total_tokens":4}`,
	`{"total_tokens":3,"total_tokens":null}`, `{"total_tokens":3,"total_tokens":"x"}`,
	`{"prompt_tokens":1,"prompt_tokens_details":null}`, `{"prompt_tokens":1,"prompt_tokens_details":3}`, `{"prompt_tokens":1,"prompt_tokens_details":"x"}`,
	`{"prompt_tokens":1,"prompt_tokens_details":[{"cached_tokens":2}]}`, `{"prompt_tokens":1,"prompt_tokens_details":{}}`,
	`{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":2,"cached_tokens":3}}`, `{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":null,"cached_tokens":3}}`,
	`{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":"2"}}`, `{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":2.5}}`,
	`{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":-2}}`, `{"prompt_tokens":1,"prompt_tokens_details":{"c\u0061ched_tokens":2}}`,
	`{"prompt_tokens":1,"prompt_tokens_details":{"a":{"cached_tokens":9},"cached_tokens":2}}`, `{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":2},"prompt_tokens_details":{"x":1}}`,
	`{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":2},"prompt_tokens_details":{"cached_tokens":5}}`,
	`{"completion_tokens":2,"completion_tokens_details":{"reasoning_tokens":1},"output_tokens_details":{"reasoning_tokens":7}}`,
	` {"prompt_tokens":1}`, `{"prompt_tokens":1} `, `{"prompt_tokens" : 1 , "x" : [ {"y":"\"}"} ] }`, `[]`, `null`, `7`,
}

// TestCountsOfMatchesReadCounts holds the one-pass usage reader to
// readCounts on valid usage objects, the cases above and random mixes of
// their members.
func TestCountsOfMatchesReadCounts(t *testing.T) {
	check := func(u string) {
		t.Helper()
		if off, _ := checkSyntax([]byte(u)); off >= 0 {
			return // readCountsRaw's callers have checked the syntax
		}
		c, ok := readCountsRaw([]byte(u))
		wc, wok := readCounts(jv.Parse(u))
		if ok != wok || ok && c != wc {
			t.Fatalf("%s: one pass %+v %v, readCounts %+v %v", u, c, ok, wc, wok)
		}
	}
	var members []string
	for _, u := range countsCases {
		check(u)
		if g := gjson.Parse(u); g.IsObject() {
			g.ForEach(func(k, v gjson.Result) bool {
				members = append(members, k.Raw+":"+v.Raw)
				return true
			})
		}
	}
	rng := rand.New(rand.NewSource(7))
	sure := 0
	for k := 0; k < 20000; k++ {
		var m []string
		for j := rng.Intn(6); j >= 0; j-- {
			m = append(m, members[rng.Intn(len(members))])
		}
		u := "{" + strings.Join(m, ",") + "}"
		if _, _, s := countsOf([]byte(u)); s {
			sure++
		}
		check(u)
	}
	if sure < 5000 {
		t.Fatalf("the one pass was sure of only %d objects", sure)
	}
}
