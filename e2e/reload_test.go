package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/internal/testkit"
)

// TestReloadThroughTheAPI edits the config file under a running dev
// system and reloads it with POST /tt/api/v1/reload: the filter, whose
// plugin configuration names only the accountant, enforces the new plan
// from its next sync. The SDK's client meets search_rpm's one request an
// hour, then passes once the limit is raised.
func TestReloadThroughTheAPI(t *testing.T) {
	ctx := testContext(t)
	orig, err := os.ReadFile("testdata/e2e.yaml")
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "e2e.yaml")
	if err := os.WriteFile(config, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	s := startDev(t, config, "")
	key := mint(ctx, t, s, search)
	oai := openaiClient(s, key)
	if _, err := oai.Chat.Completions.New(ctx, chatParams); err != nil {
		t.Fatal(err)
	}
	_, err = oai.Chat.Completions.New(ctx, chatParams)
	wantOpenAIError(t, err, 429, "rate_limited", "search_rpm")

	const from = "      type: rpm\n      amount: 1\n"
	if !strings.Contains(string(orig), from) {
		t.Fatalf("testdata/e2e.yaml has no %q for this test to edit", from)
	}
	edited := strings.Replace(string(orig), from, "      type: rpm\n      amount: 100\n", 1)
	if err := os.WriteFile(config, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.AccountantURL()+"/tt/api/v1/reload", nil)
	req.Header.Set("Authorization", "Bearer e2e-admin-token")
	resp, body := testkit.Send(t, req)
	if resp.StatusCode != 200 {
		t.Fatalf("reload: %d %s", resp.StatusCode, body)
	}
	eventually(ctx, t, "the filter enforces the reloaded plan", func() (bool, string) {
		l := me(ctx, t, s, key).limit(t, "search_rpm")
		return l.Amount == 100, fmt.Sprintf("search_rpm amount %d", l.Amount)
	})
	if _, err := oai.Chat.Completions.New(ctx, chatParams); err != nil {
		t.Errorf("after the reload: %v", err)
	}
}
