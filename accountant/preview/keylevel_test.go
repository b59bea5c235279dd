package preview

import (
	"bytes"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// TestKeyLevelReplay: a key-level template is recomputed per key, each
// key's rows in its own instance at the key's node, with a key's own
// override applied.
func TestKeyLevelReplay(t *testing.T) {
	dir := t.TempDir()
	config := testkit.WriteFile(t, dir, "keys.yaml", []byte(testkit.Dev1Tenants+`  limits:
    - { id: key_requests, attach: { level: key }, type: quota_requests, amount: 100, period: day, override: { allow: true } }
`))
	const owner = "org:acme/team:ml/user:dev1"
	var b []byte
	for i, kid := range []string{"vk_FEKZdMs2UQRi", "vk_FEKZdMs2UQRi", "vk_0therKey0000"} {
		end := time.Date(2026, 8, 10, 12, 0, i, 0, time.UTC)
		r := ledger.Row{RequestID: "tt_aaaaaaaaaaaaaaaaaaaaaaaa" + string("aei"[i]) + "a", Start: end.Add(-time.Second), End: end, Node: owner, KID: kid,
			Endpoint: "/v1/chat/completions", Provider: "openai", Model: "gpt-4o-mini", Usage: ledger.Usage{Input: 1, Output: 1, Total: 2},
			Status: 200, Decision: ledger.Admitted}
		b = ledgerlog.AppendRow(b, &r)
	}
	log := testkit.WriteFile(t, dir, "decisions.jsonl", b)
	var out bytes.Buffer
	err := Run(&out, Options{ConfigPath: config, LogPath: log, At: at,
		Runtime: govern.Runtime{Overrides: []govern.Override{{LimitID: "key_requests", Node: govern.KeyLeaf(owner, "vk_0therKey0000"), Amount: 5}}}})
	if err != nil {
		t.Fatal(err)
	}
	reportHas(t, out.String(),
		"  [quota_requests] key_requests @ "+owner+"/key:vk_FEKZdMs2UQRi  observed 2 / ceiling 100  (frac 0.0200, rows 2)\n",
		"  [quota_requests] key_requests @ "+owner+"/key:vk_0therKey0000  observed 1 / ceiling 5  (frac 0.2000, rows 1)\n")
}
