package filter_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/testwasm"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/wasmtest"
)

// authRecorder is an accountant that answers every sync with nothing new
// and remembers the Authorization header of each call.
type authRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (a *authRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.URL.Path == syncwire.SyncPath {
		a.seen = append(a.seen, r.Header.Get("Authorization"))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{}`))
}

// TestAccountantTokenFromEnv: with accountant.token_env the filter sends
// the token it read from the VM's environment at plugin start; without the
// variable the plugin does not start and says how to pass it.
func TestAccountantTokenFromEnv(t *testing.T) {
	conf := []byte(`{"accountant":{"cluster":"accountant","token_env":"TT_ACCOUNTANT_TOKEN"}}`)
	acct := &authRecorder{}
	clock := wasmtest.NewManualClock(t0)
	h, err := wasmtest.New(context.Background(), wasmtest.Config{
		Module:       testwasm.Filter(t),
		PluginConfig: conf,
		Clock:        clock,
		Env:          map[string]string{"TT_ACCOUNTANT_TOKEN": "s3cret-from-env"},
		Clusters:     map[string]wasmtest.Cluster{"accountant": {Handler: acct}},
	})
	if err != nil {
		t.Fatalf("starting the host: %v", err)
	}
	defer h.Close()
	for range 2 {
		clock.Advance(time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := h.WaitCallouts(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	acct.mu.Lock()
	seen := acct.seen
	acct.mu.Unlock()
	if len(seen) == 0 || seen[0] != "Bearer s3cret-from-env" {
		t.Errorf("Authorization on sync polls: %q, want Bearer s3cret-from-env", seen)
	}

	_, err = wasmtest.New(context.Background(), wasmtest.Config{
		Module:       testwasm.Filter(t),
		PluginConfig: conf,
		Clock:        clock,
		Clusters:     map[string]wasmtest.Cluster{"accountant": {Handler: acct}},
	})
	if err == nil || !strings.Contains(err.Error(), "the environment variable TT_ACCOUNTANT_TOKEN is not set in the wasm VM") {
		t.Errorf("starting without the variable: %v", err)
	}
}
