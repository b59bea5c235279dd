package fleettest

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// chat sends one chat completion through a replica's gateway with key.
func chat(t *testing.T, r *Replica, key string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("replica %d: %v", r.Index, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestFleetStartsKillsAndRestarts: every replica serves on its own
// addresses; a replica killed with SIGKILL is gone, the others keep
// serving, and it serves again after Restart on the same addresses.
func TestFleetStartsKillsAndRestarts(t *testing.T) {
	f := Start(t, Options{Replicas: 2, Config: "testdata/fleet.yaml", NoControl: true})
	seen := map[string]bool{}
	for _, r := range f.Replicas() {
		if r.DemoKey == "" {
			t.Fatalf("replica %d minted no demo key:\n%s", r.Index, r.Log())
		}
		if seen[r.URL] || seen[r.AccountantURL] {
			t.Fatalf("replica %d shares an address: %s %s", r.Index, r.URL, r.AccountantURL)
		}
		seen[r.URL], seen[r.AccountantURL] = true, true
		if code := chat(t, r, r.DemoKey); code != http.StatusOK {
			t.Errorf("replica %d answered %d", r.Index, code)
		}
	}
	url := f.Replica(1).URL
	f.Kill(1)
	if f.Replica(1).Running() {
		t.Fatal("replica 1 runs after Kill")
	}
	if _, err := http.Get(url + "/tt/v1/me"); err == nil {
		t.Error("the killed replica's gateway still answers")
	}
	if code := chat(t, f.Replica(0), f.Replica(0).DemoKey); code != http.StatusOK {
		t.Errorf("replica 0 answered %d while replica 1 was down", code)
	}
	f.Restart(1)
	if f.Replica(1).URL != url {
		t.Errorf("replica 1 came back on %s, not %s", f.Replica(1).URL, url)
	}
	if code := chat(t, f.Replica(1), f.Replica(1).DemoKey); code != http.StatusOK {
		t.Errorf("replica 1 answered %d after its restart", code)
	}
}
