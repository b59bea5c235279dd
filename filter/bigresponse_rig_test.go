package filter_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// TestAnswerPastTheCopyCapThroughTheWasm: the same through the real
// filter.wasm in the embedded host: a 9 MiB answer whose usage follows the
// text is recorded with the output the provider reported.
func TestAnswerPastTheCopyCapThroughTheWasm(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"`)
		line := strings.Repeat("x", 64<<10)
		for n := 0; n < 9<<20; n += len(line) {
			io.WriteString(w, line)
		}
		io.WriteString(w, `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":16000,"total_tokens":16008}}`)
	})
	r := newRig(t, rigOptions{governance: gov(`{"id":"team_tpm","attach":{"level":"team"},"type":"tpm","amount":100000000,"period":"1m"}`),
		keys: []testKey{dev1Key}, accountant: true, upstream: up, workers: 1})
	resp := r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 200)
	r.step(time.Second)
	row, ok := r.acct.row(resp.Headers.Get("X-Tt-Request-Id"))
	if !ok {
		t.Fatalf("no row for %s", resp.Headers.Get("X-Tt-Request-Id"))
	}
	if want := (ledger.Usage{Input: 8, Output: 16000, Total: 16008}); row.Usage != want || row.Estimated != (ledger.Estimated{}) {
		t.Fatalf("row usage %+v estimated %+v, want %+v as reported", row.Usage, row.Estimated, want)
	}
}
