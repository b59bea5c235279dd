package filter_test

import (
	"encoding/json"
	"testing"
	"time"
)

// TestAnthropicShapedRefusals: on Anthropic's paths every refusal the
// gateway makes is Anthropic's envelope (error.type rate_limit_error,
// authentication_error, …) with our refused_by and enforcement inside
// error, our type in error.details.error_code and the request id as
// request_id; and so is a refusal to a client that speaks Anthropic's API
// (anthropic-version) elsewhere. OpenAI paths keep seed 000's body.
func TestAnthropicShapedRefusals(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamRPM, `,"require_key":true`), keys: []testKey{dev1Key, searchKey}})
	messages := func(k testKey, headers map[string]string) req {
		return req{path: "/v1/messages", key: k, apiKey: true, body: messagesBody("claude-3-5-haiku-latest", germany), headers: headers}
	}
	for i := 0; i < 3; i++ {
		mustStatus(t, r.do(messages(dev1Key, nil)), 200)
	}
	resp := r.do(messages(dev1Key, nil))
	mustStatus(t, resp, 429)
	golden(t, "rate_limited_rpm_anthropic", render(t, resp))
	var env struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Details struct {
				ErrorCode string `json:"error_code"`
			} `json:"details"`
			RefusedBy struct {
				LimitID string `json:"limit_id"`
			} `json:"refused_by"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(resp.Body, &env); err != nil {
		t.Fatal(err)
	}
	if env.Type != "error" || env.Error.Type != "rate_limit_error" || env.Error.Details.ErrorCode != "rate_limited" ||
		env.Error.RefusedBy.LimitID != "team_rpm" || env.RequestID != resp.Headers.Get("Request-Id") || env.RequestID == "" {
		t.Errorf("not Anthropic's envelope with our members: %+v\n%s", env, resp.Body)
	}

	for _, c := range []struct {
		name   string
		q      req
		status int
		typ    string
	}{
		{"unknown key on /v1/messages", req{path: "/v1/messages", key: newTestKey("vk_unknownunkno", dev1Key.owner), apiKey: true, body: messagesBody("claude-3-5-haiku-latest", germany)}, 401, "authentication_error"},
		{"no key on count_tokens", req{path: "/v1/messages/count_tokens", body: messagesBody("claude-3-5-haiku-latest", germany)}, 401, "authentication_error"},
		{"no key on an OpenAI path from an Anthropic client", req{method: "GET", path: "/v1/models", headers: map[string]string{"Anthropic-Version": "2023-06-01"}}, 401, "authentication_error"},
		{"unreadable body", req{path: "/v1/messages", key: searchKey, body: `{"model":`}, 400, "invalid_request_error"},
	} {
		resp := r.do(c.q)
		mustStatus(t, resp, c.status)
		var got struct {
			Type  string `json:"type"`
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		if err := json.Unmarshal(resp.Body, &got); err != nil || got.Type != "error" || got.Error.Type != c.typ {
			t.Errorf("%s: %d %s, want Anthropic's %s", c.name, resp.Status, resp.Body, c.typ)
		}
	}

	// An OpenAI path keeps seed 000's body by default.
	resp = r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 429)
	var seed struct {
		Type  *string `json:"type"`
		Error struct {
			Type string  `json:"type"`
			Code *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp.Body, &seed); err != nil || seed.Type != nil || seed.Error.Type != "rate_limited" || seed.Error.Code != nil {
		t.Errorf("OpenAI path: %s", resp.Body)
	}
}

// TestProviderShapedRefusals: governance.refusals.shape: provider adds
// OpenAI's param and code to the bodies on OpenAI paths.
func TestProviderShapedRefusals(t *testing.T) {
	scoped := newTestKey("vk_scopedscoped", "org:acme/team:ml/user:dev2").withScopes(`{"models":["gpt-4o*"]}`)
	r := newRig(t, rigOptions{governance: gov(limTeamRPM, `,"require_key":true,"refusals":{"shape":"provider"}`), keys: []testKey{dev1Key, scoped}})
	for i := 0; i < 3; i++ {
		mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	}
	resp := r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 429)
	golden(t, "rate_limited_rpm_openai", render(t, resp))

	r.step(time.Minute)
	for _, c := range []struct {
		q           req
		status      int
		code, param string
	}{
		{req{path: "/v1/chat/completions", body: chatGermany}, 401, "invalid_api_key", ""},
		{req{path: "/v1/chat/completions", key: scoped, body: chatBody("o4-mini", germany)}, 403, "scope_denied", "model"},
	} {
		resp := r.do(c.q)
		mustStatus(t, resp, c.status)
		var got struct {
			Error struct {
				Code  string  `json:"code"`
				Param *string `json:"param"`
			} `json:"error"`
		}
		if err := json.Unmarshal(resp.Body, &got); err != nil || got.Error.Code != c.code ||
			(c.param == "") != (got.Error.Param == nil) || (got.Error.Param != nil && *got.Error.Param != c.param) {
			t.Errorf("%s: %s, want code %q param %q", c.q.path, resp.Body, c.code, c.param)
		}
	}
}

// TestKeyMessages: a credential that starts as a virtual key but is not
// one is named malformed (also with require_key off: it was meant as a
// key), and a foreign credential is named with the header it came in.
func TestKeyMessages(t *testing.T) {
	for _, requireKey := range []string{`,"require_key":true`, ``} {
		r := newRig(t, rigOptions{governance: gov(limTeamRPM, requireKey), keys: []testKey{dev1Key}})
		cut := dev1Key.key[:len(dev1Key.key)-1]
		for _, c := range []struct {
			name    string
			headers map[string]string
			status  int
			want    string
		}{
			{"malformed_bearer", map[string]string{"Authorization": "Bearer " + cut}, 401,
				"malformed virtual key in the Authorization header: it starts with tt-vk_ but is not tt-vk_ followed by 12 and 32 letters or digits joined by -; it may be cut short or carry extra characters: send the key exactly as it was minted"},
			{"malformed_api_key", map[string]string{"X-Api-Key": cut + "x-"}, 401,
				"malformed virtual key in the x-api-key header: it starts with tt-vk_ but is not tt-vk_ followed by 12 and 32 letters or digits joined by -; it may be cut short or carry extra characters: send the key exactly as it was minted"},
			{"foreign_api_key", map[string]string{"X-Api-Key": "sk-ant-api03-abc"}, 401,
				"not a virtual key: the x-api-key header does not hold a tokentriage virtual key (tt-vk_<12>-<32>), and this gateway requires one; send the key you were given (a provider's own key never goes through it)"},
		} {
			resp := r.do(req{path: "/v1/chat/completions", headers: c.headers, body: chatGermany})
			if requireKey == "" && c.name == "foreign_api_key" {
				mustStatus(t, resp, 200) // anonymous traffic is served
				continue
			}
			mustStatus(t, resp, c.status)
			var got struct {
				Error struct{ Message string } `json:"error"`
			}
			if err := json.Unmarshal(resp.Body, &got); err != nil || got.Error.Message != c.want {
				t.Errorf("%s (require_key %q): %s\nwant message %q", c.name, requireKey, resp.Body, c.want)
			}
			if resp.Headers.Get("X-Request-Id") == "" || resp.Headers.Get("X-Request-Id") != resp.Headers.Get("X-Tt-Request-Id") ||
				resp.Headers.Get("Request-Id") != resp.Headers.Get("X-Tt-Request-Id") || resp.Headers.Get("X-Should-Retry") != "false" {
				t.Errorf("%s: request id and retry headers %v", c.name, resp.Headers)
			}
		}
	}
}
