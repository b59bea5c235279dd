package llm

import (
	"testing"

	"github.com/tidwall/gjson"
)

func TestInjectIncludeUsage(t *testing.T) {
	for i, tc := range []struct {
		in, want string
		changed  bool
	}{
		{`{"model":"m","stream":true}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, true},
		{"{\"model\":\"m\",\"stream\":true\n}\n", "{\"model\":\"m\",\"stream\":true,\"stream_options\":{\"include_usage\":true}\n}\n", true},
		{`{"stream":true,"stream_options":null}`, `{"stream":true,"stream_options":{"include_usage":true}}`, true},
		{`{"stream":true,"stream_options":{}}`, `{"stream":true,"stream_options":{"include_usage":true}}`, true},
		{`{"stream":true,"stream_options":{ }}`, `{"stream":true,"stream_options":{"include_usage":true}}`, true},
		{`{"stream":true,"stream_options":{"include_obfuscation":false}}`, `{"stream":true,"stream_options":{"include_usage":true,"include_obfuscation":false}}`, true},
		{`{"stream":true,"stream_options":{"include_usage":false,"x":1}}`, `{"stream":true,"stream_options":{"include_usage":true,"x":1}}`, true},
		{`{"stream":true,"stream_options":{"include_usage": null}}`, `{"stream":true,"stream_options":{"include_usage": true}}`, true},
		{`{"stream":true,"stream_options":{"include_usage":true}}`, ``, false},
		{`{"stream":false}`, ``, false},
		{`{"model":"m"}`, ``, false},
		{`{"stream":"true"}`, ``, false},
		{`{"stream":true,"stream_options":"x"}`, ``, false},
		{`{"stream":true,"stream_options":{"include_usage":1}}`, ``, false},
		{`{"stream":true,"stream":true}`, ``, false},
		{`{"stream":true,"stream_options":{},"stream_options":{}}`, ``, false},
		{`{"stream":true,"stream_options":{"include_usage":false,"include_usage":false}}`, ``, false},
		{`{"stream":true`, ``, false},
		{`[{"stream":true}]`, ``, false},
		{``, ``, false},
	} {
		got, changed := InjectIncludeUsage([]byte(tc.in))
		want := tc.want
		if !tc.changed {
			want = tc.in
		}
		if changed != tc.changed || string(got) != want {
			t.Errorf("case %d: InjectIncludeUsage(%s) = %s, %v; want %s, %v", i, tc.in, got, changed, want, tc.changed)
			continue
		}
		if changed {
			body := got
			if !gjson.GetBytes(body, "model").Exists() {
				body = append([]byte(`{"model":"m",`), got[1:]...)
			}
			req, err := ParseRequest("/v1/chat/completions", body)
			if err != nil || !req.IncludeUsage || !req.Stream {
				t.Errorf("case %d: rewritten body does not parse as streaming with include_usage: %+v %v", i, req, err)
			}
		}
	}
}
