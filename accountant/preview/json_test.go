package preview

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestJSONDocument: --format json carries the text report's figures, line
// for line, with the closing stanza's comparison; goldens keep its shape.
func TestJSONDocument(t *testing.T) {
	url := startAccountant(t, nil)
	var out bytes.Buffer
	err := Run(&out, Options{ConfigPath: "testdata/sixlimits.yaml", LogPath: "testdata/sandbox.jsonl", At: at, Live: liveFrom(url), JSON: true})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "sandbox_live.json", out.Bytes())
	var doc Document
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := Run(&text, Options{ConfigPath: "testdata/sixlimits.yaml", LogPath: "testdata/sandbox.jsonl", At: at, Live: liveFrom(url)}); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Count(text.Bytes(), []byte("\n  ["))
	if n := len(doc.Exact) + len(doc.Approximate) + len(doc.Estimated) + len(doc.Live.Counters); n != lines {
		t.Errorf("the JSON has %d entries, the text %d instance lines", n, lines)
	}
	found := false
	for _, e := range doc.Exact {
		if e.LimitID == "team_monthly_tokens" && e.Node == "org:acme/team:ml" {
			found = e.Observed == "60" && e.Ceiling == "50000000" && e.Rows == 1 && e.Seen && !e.Over
		}
	}
	if !found {
		t.Errorf("no exact entry for seed 002's team_monthly_tokens line: %+v", doc.Exact)
	}

	// Without --accountant there is no live member; a failed read names
	// the error and the document is still written.
	out.Reset()
	if err := Run(&out, Options{ConfigPath: "testdata/sixlimits.yaml", LogPath: "testdata/sandbox.jsonl", At: at, JSON: true}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out.Bytes(), []byte(`"live": null`)) {
		t.Errorf("no live: null without --accountant:\n%s", out.Bytes())
	}
	out.Reset()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // nothing listens there any more
	err = Run(&out, Options{ConfigPath: "testdata/sixlimits.yaml", LogPath: "testdata/sandbox.jsonl", At: at, JSON: true, Live: liveFrom(gone.URL)})
	var le *LiveError
	if !asLiveError(err, &le) || !bytes.Contains(out.Bytes(), []byte(`"error": "cannot reach the accountant`)) {
		t.Errorf("unreadable live counters: %v\n%s", err, out.Bytes())
	}
}

func asLiveError(err error, le **LiveError) bool {
	e, ok := err.(*LiveError)
	*le = e
	return ok
}
