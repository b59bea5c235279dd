package llm

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestKeysThatFoldToAGovernedKeyAreRefused: a member whose name folds to a
// governed one (ASCII case, the Kelvin sign, the long s, escapes of
// either) is refused with a 400 naming it, wherever the parsers read
// governed members; the same names where nothing is governed, and
// upper-case names that fold to nothing governed, are let through.
func TestKeysThatFoldToAGovernedKeyAreRefused(t *testing.T) {
	const fold = ` differs from %q only in case or Unicode folding, and a provider that matches keys without regard to case (Go's encoding/json does) reads it as %q; send the key spelt exactly %q, once`
	for i, c := range []struct {
		path, body string
		field, key string // the error's field and the key as QuoteToASCII writes it
		name       string
	}{
		{"/v1/chat/completions", `{"model":"m","max_tokens":5,"MAX_TOKENS":16000}`, "MAX_TOKENS at byte 28", `"MAX_TOKENS"`, "max_tokens"},
		{"/v1/chat/completions", `{"model":"m","max_tokens":5,"max_to` + "\u212A" + `ens":16000}`, "max_to\u212Aens at byte 28", `"max_to\u212aens"`, "max_tokens"},
		{"/v1/chat/completions", `{"model":"m","max_tokens":5,"max_to\u212Aens":16000}`, "max_to\u212Aens at byte 28", `"max_to\u212aens"`, "max_tokens"},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","MODEL":"o3-pro"}`, "MODEL at byte 23", `"MODEL"`, "model"},
		{"/v1/chat/completions", `{"model":"m","\u017Ftream":true}`, "\u017Ftream at byte 13", `"\u017ftream"`, "stream"},
		{"/v1/chat/completions", `{"model":"m","Max_Completion_Tokens":9}`, "Max_Completion_Tokens at byte 13", `"Max_Completion_Tokens"`, "max_completion_tokens"},
		{"/v1/chat/completions", `{"model":"m","N":16}`, "N at byte 13", `"N"`, "n"},
		{"/v1/chat/completions", `{"model":"m","stream_options":{"Include_Usage":false}}`, "stream_options.Include_Usage at byte 31", `"Include_Usage"`, "include_usage"},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","Content":"a long prompt"}]}`, "messages[0].Content at byte 40", `"Content"`, "content"},
		{"/v1/chat/completions", `{"model":"m","messages":[{"content":[{"type":"text","TEXT":"x"}]}]}`, "messages[0].content[0].TEXT at byte 52", `"TEXT"`, "text"},
		{"/v1/chat/completions", `{"model":"m","messages":[{"tool_calls":[{"Function":{"arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].Function at byte 41", `"Function"`, "function"},
		{"/v1/chat/completions", `{"model":"m","messages":[{"tool_calls":[{"function":{"ARGUMENTS":"{}"}}]}]}`, "messages[0].tool_calls[0].function.ARGUMENTS at byte 53", `"ARGUMENTS"`, "arguments"},
		{"/v1/completions", `{"model":"m","Prompt":"x"}`, "Prompt at byte 13", `"Prompt"`, "prompt"},
		{"/v1/completions", `{"model":"m","BEST_OF":20}`, "BEST_OF at byte 13", `"BEST_OF"`, "best_of"},
		{"/v1/embeddings", `{"model":"m","Input":"x"}`, "Input at byte 13", `"Input"`, "input"},
		{"/v1/responses", `{"model":"m","Max_Output_Tokens":9}`, "Max_Output_Tokens at byte 13", `"Max_Output_Tokens"`, "max_output_tokens"},
		{"/v1/responses", `{"model":"m","input":[{"type":"message","CONTENT":"x"}]}`, "input[0].CONTENT at byte 40", `"CONTENT"`, "content"},
		{"/v1/responses", `{"model":"m","tools":[{"Type":"file_search"}]}`, "tools[0].Type at byte 23", `"Type"`, "type"},
		{"/v1/messages", `{"model":"m","max_tokens":10,"System":"x"}`, "System at byte 29", `"System"`, "system"},
	} {
		_, err := ParseRequest(c.path, []byte(c.body))
		want := "request body: " + c.field + ": the key " + c.key + strings.ReplaceAll(fold, "%q", `"`+c.name+`"`)
		if err == nil || err.Error() != want {
			t.Errorf("case %d: %s %s:\n got %v\nwant %s", i, c.path, c.body, err, want)
		}
		// Go's encoding/json does read a top-level one as the governed
		// member (the last of the two, as written in these bodies).
		if !strings.ContainsAny(c.field, ".[") {
			typ := reflect.StructOf([]reflect.StructField{{Name: "V", Type: reflect.TypeOf(json.RawMessage{}), Tag: reflect.StructTag(`json:"` + c.name + `"`)}})
			dst := reflect.New(typ)
			if err := json.Unmarshal([]byte(c.body), dst.Interface()); err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			var m map[string]json.RawMessage
			json.Unmarshal([]byte(c.body), &m)
			key := strings.Fields(c.field)[0]
			if got := string(dst.Elem().Field(0).Bytes()); got != string(m[key]) {
				t.Errorf("case %d: encoding/json reads %s as %s, not the %s member's %s", i, c.name, got, key, m[key])
			}
		}
	}
	for i, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","User":"u","Metadata":{"MAX_TOKENS":1},"max_tokens":5}`},
		{"/v1/chat/completions", `{"model":"m","Max_Output_Tokens":9,"SYSTEM":"x","Instructions":"y"}`},
		{"/v1/embeddings", `{"model":"m","input":"x","MAX_TOKENS":9}`},
		{"/v1/responses", `{"model":"m","input":"x","MAX_TOKENS":9,"Messages":[]}`},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x","Name":"n"}]}`},
		{"/v1/chat/completions", `{"model":"m","tools":[{"Type":"function"}],"Tools":1}`},
	} {
		if _, err := ParseRequest(c.path, []byte(c.body)); err != nil {
			t.Errorf("case %d: %s %s: %v", i, c.path, c.body, err)
		}
	}
}
