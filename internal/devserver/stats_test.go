package devserver

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// The filter's stats are on the accountant's /metrics in dev, named and
// labelled as Envoy shows them with envoy/envoy.yaml's stats_tags: a
// refusal by a limit is counted under that limit's id and type.
func TestGatewayStatsOnMetrics(t *testing.T) {
	ctx := testContext(t)
	s := start(t, Options{ConfigPath: "testdata/tight.yaml"})
	k := mintKey(ctx, t, s, "org:acme/team:ml/user:dev1")
	codes := map[int]int{}
	for range 5 {
		code, _ := post(t, s.URL(), k.Key, nil)
		codes[code]++
	}
	if codes[429] == 0 {
		t.Fatalf("no request met user_rpm: %v", codes)
	}
	resp, err := http.Get(s.AccountantURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	text := string(b)
	for _, want := range []string{
		`tokentriage_refusals{limit_id="user_rpm",limit_type="rpm"} ` + strconv.Itoa(codes[429]),
		"# TYPE tokentriage_admitted counter",
		"# TYPE tokentriage_ledger_rows_queued gauge",
		"tokentriage_refused_rpm " + strconv.Itoa(codes[429]),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
