package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// nodeSDKs are the npm packages testdata/sdk_tools.mjs drives, pinned:
// one npm install of them all (npm's cache makes a second run quick).
var nodeSDKs = []string{
	"ai@7.0.185", "@ai-sdk/openai@4.0.126", "@ai-sdk/anthropic@4.0.112", "zod@4.6.7",
	"@langchain/core@1.4.0", "@langchain/openai@1.6.0", "@langchain/anthropic@1.5.11",
}

const nodeSDKConfig = dev1Tenants + `  limits:
    - id: user_day
      attach: { level: user }
      type: budget_usd
      amount_usd: 10
      period: day
    - id: user_rpm
      attach: { level: user }
      type: rpm
      amount: 600
      period: 1m
`

// TestNodeSDKTools runs the Vercel AI SDK's generateObject, streamObject
// and tool loops, and LangChain's withStructuredOutput and bindTools
// (invoked and streamed), with OpenAI's chat completions and Responses
// API and Anthropic's messages, at their default settings against `dev`'s
// gateway and stub: every case gets an answer its helper accepts (objects
// parsed by the zod schema they were asked with, tool arguments by the
// tool's), and every call is one request, served and billed once (no SDK
// retried a thing). It installs the pinned npm packages into a temporary
// directory with one npm install; without node, npm or the registry it
// fails saying which.
func TestNodeSDKTools(t *testing.T) {
	ctx := testContext(t)
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not on PATH: this test runs the Vercel AI SDK and LangChain under Node.js (20 or newer); install nodejs and npm (apt-get install nodejs npm), as .ci/run does", bin)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"private":true,"type":"module"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join("testdata", "sdk_tools.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sdk_tools.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	install := exec.CommandContext(ctx, "npm", append([]string{"install", "--no-audit", "--no-fund", "--loglevel=error"}, nodeSDKs...)...)
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s failed (%v): is the npm registry reachable from here (npm config get registry)? Its output:\n%s", strings.Join(nodeSDKs, " "), err, out)
	}

	s := startDev(t, writeConfig(t, nodeSDKConfig), "")
	k, err := s.MintKey(ctx, "org:acme/team:ml/user:dev1", vkey.Scopes{})
	if err != nil {
		t.Fatal(err)
	}
	before := s.Stub().Served()
	run := exec.CommandContext(ctx, "node", "sdk_tools.mjs")
	run.Dir = dir
	run.Env = append(os.Environ(), "TT_GATEWAY="+s.URL(), "TT_KEY="+k.Key, "AI_SDK_LOG_WARNINGS=false", "NODE_NO_WARNINGS=1")
	var out bytes.Buffer
	run.Stdout, run.Stderr = &out, &out
	if err := run.Run(); err != nil {
		t.Fatalf("node sdk_tools.mjs: %v\n%s", err, out.String())
	}
	for _, c := range []string{
		"vercel generateObject openai responses", "vercel generateObject openai chat", "vercel generateObject anthropic",
		"vercel streamObject openai chat", "vercel streamObject anthropic",
		"vercel tools openai responses", "vercel tools openai chat", "vercel tools anthropic", "vercel streamText tools openai chat",
		"langchain withStructuredOutput openai", "langchain bindTools openai", "langchain bindTools stream openai",
		"langchain withStructuredOutput anthropic", "langchain bindTools anthropic", "langchain bindTools stream anthropic",
	} {
		if !strings.Contains(out.String(), "ok "+c+"\n") {
			t.Errorf("case %q did not pass:\n%s", c, out.String())
		}
	}
	m := regexp.MustCompile(`(?m)^calls (\d+)$`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no call count:\n%s", out.String())
	}
	calls, _ := strconv.ParseInt(m[1], 10, 64)
	if served := s.Stub().Served() - before; served != calls {
		t.Errorf("the upstream served %d requests for %d calls: an SDK retried or failed over", served, calls)
	}
	// Every call is billed to the key, once.
	admin := &api.Client{BaseURL: s.AccountantURL(), Token: "e2e-admin-token"}
	eventually(ctx, t, "every call in the spend report", func() (bool, string) {
		rep, err := admin.Spend(context.Background(), url.Values{"group_by": {"key"}})
		if err != nil {
			return false, err.Error()
		}
		var n int64
		for _, g := range rep.Groups {
			if g.Key["key"] == k.KID {
				n = g.Total.Requests
			}
		}
		return n == calls && rep.Total.Requests == calls, fmt.Sprintf("%d of %d billed to %s, %d in all", n, calls, k.KID, rep.Total.Requests)
	})
}
