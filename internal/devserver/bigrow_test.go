package devserver

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// TestHugeModelNamesDoNotJamTheLedger: 24 requests naming a 7.8 MB model
// (under max_body_bytes; gate 2 refuses them 400), then 34 ordinary ones,
// through a real dev system: every one of the 58 is in the ledger, none of
// them longer than a row keeps. Before, the 24 rows made a batch the
// accountant refused with 413 forever, and none of the 34 after them was
// recorded.
func TestHugeModelNamesDoNotJamTheLedger(t *testing.T) {
	s := start(t, Options{})
	ctx := testContext(t)
	k := mintKey(ctx, t, s, "org:acme/team:search")
	huge := strings.Repeat("m", 7_800_000)
	send := func(model string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+model+`","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+k.Key)
		req.Header.Set("Content-Type", "application/json")
		resp, _ := testkit.Send(t, req)
		return resp.StatusCode
	}
	answered := 0
	for i := 0; i < 24; i++ {
		if code := send(huge); code != 0 {
			answered++
		}
	}
	for i := 0; i < 34; i++ {
		if code := send("gpt-4o-mini"); code != 200 {
			t.Fatalf("ordinary request %d: %d", i, code)
		}
	}
	rows := closedRows(t, s)
	var hugeRows, ordinary int
	for _, r := range rows {
		switch {
		case r.Kind == ledger.KindStart:
		case r.Model == "gpt-4o-mini":
			ordinary++
		case len(r.Model) <= ledger.MaxFieldBytes && strings.HasPrefix(r.Model, "mmmm"):
			hugeRows++
		}
	}
	if hugeRows != answered || ordinary != 34 {
		t.Errorf("the ledger holds %d rows of the %d huge requests answered (their model at most %d bytes) and %d of the 34 ordinary ones", hugeRows, answered, ledger.MaxFieldBytes, ordinary)
	}
}
