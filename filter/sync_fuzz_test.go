package filter

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// FuzzSyncAnswer feeds an arbitrary accountant answer through everything a
// filter does with one: applySync writes its parts and feed pages to
// shared data, refresh reads the version record, the plan and the prices
// into the VM, and a request then goes through both gates on what was
// loaded (its key, chain nodes and counters read from the tables). Nothing
// may panic, a request still settles with every lease back, and a second
// VM loading the same shared data reaches the same state. Each decoder is
// also fed the raw bytes as a record of its own.
func FuzzSyncAnswer(f *testing.F) {
	key := "tt-vk_FEKZdMs2UQRi-3kLwQ0vX9bY2cD4eF6gH8iJ0kL2mN4oP"
	good := syncwire.Sync{
		Runtime: syncwire.RuntimePage{Page: syncwire.Page{Cursor: "db.3", Reset: true},
			Keys: []syncwire.Key{{KID: "vk_FEKZdMs2UQRi", SHA256: vkey.Hash(key),
				Owner: "org:acme/team:ml/user:dev1", Scopes: vkey.Scopes{Models: []string{"gpt-*"}, AllowPassthrough: true}}},
			Nodes:     []syncwire.Node{{ID: "org:acme/team:new", Tree: true}, {ID: "org:acme", Tree: true}},
			Overrides: []syncwire.Override{{LimitID: "o_budget", Node: "org:acme", Amount: 5}}},
		Snapshot: syncwire.SnapshotPage{Page: syncwire.Page{Cursor: "s.1", Reset: true}, GeneratedAt: nativeT0,
			Entries: []syncwire.Entry{{ID: "o_budget|org:acme", PeriodStart: nativeT0.AddDate(0, 0, -1), Value: 7}}},
	}
	seed, err := json.Marshal(good)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	plan := []byte(`{"plan":{"version":"p1","governance":{"enabled":true,"limits":[{"id":"o_budget","attach":{"level":"org"},"type":"budget_usd","amount_usd":1,"period":"month"},{"id":"u_conc","attach":{"level":"user"},"type":"concurrency","amount":2}]}},`)
	f.Add(append(plan, seed[bytes.IndexByte(seed, ',')+1:]...))
	f.Add([]byte(`{"plan":{"version":"p2"},"runtime":{"cursor":7,"keys":[{"kid":7},{"kid":"vk_FEKZdMs2UQRi","sha256":"zz"}],"nodes":[{"id":"ORG"},{"id":1}],"overrides":[{"amount":"x"},{"limit_id":"o_budget","node":"bad node","amount":1}]},"snapshot":{"cursor":"s","entries":[{"period_start":"never"}],"removed":[1,"x"]},"prices":{"version":"x","models":{"m":7}},"replicas":-3}`))
	f.Add([]byte(`{"runtime":{"cursor":"c","more":true,"reset":true},"snapshot":{"reset":true,"more":true},"prices":{"version":"x","models":{"gpt-4o":{"input":-1,"output":1e300}}},"replicas":1e30}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		store := newMemStore()
		clock := &manualClock{t: nativeT0}
		es := testEngines(t, 2, store, clock, `{"accountant":{"cluster":"a"}}`)
		caller := &fakeCaller{}
		for _, e := range es {
			e.host.Caller = caller
			e.host.Log = func(LogLevel, string) {}
		}
		e := es[0]
		e.Tick()
		calls := caller.take()
		if len(calls) != 1 {
			t.Fatalf("%d callouts after the first tick, want the one sync poll", len(calls))
		}
		calls[0].cb(200, body)
		es[1].Tick()
		if got, want := es[1].sync.loaded, e.sync.loaded; got != want {
			t.Fatalf("two VMs loaded different versions from one answer:\n%+v\n%+v", got, want)
		}

		// A request through both gates on what was loaded.
		s := e.NewStream()
		v := e.RequestHeaders(s, &RequestHead{Method: "POST", Path: "/v1/chat/completions", Authorization: "Bearer " + key})
		if v.Action == ActContinue {
			b := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
			v = e.RequestBody(s, len(b), true, bytesBody(b))
			if v.Action == ActContinue {
				e.ResponseHeaders(s, 200, "application/json", "")
				e.ResponseBody(s, []byte(`{"usage":{"prompt_tokens":1,"completion_tokens":1}}`), true)
			}
		}
		e.Done(s)
		e.Release(s)
		if n := e.cells.holding(); n != 0 {
			t.Fatalf("%d gauges still hold leases after the request settled", n)
		}
		s = e.NewStream()
		e.RequestHeaders(s, &RequestHead{Method: "GET", Path: "/tt/v1/me", Authorization: "Bearer " + key, EndOfStream: true})
		e.Done(s)
		e.Release(s)
		clock.Advance(time.Minute)
		e.Tick()

		// Every decoder, on the raw bytes.
		if v, ok := decodeVersions(body); ok {
			if again, ok := decodeVersions(v.append(nil)); !ok || again != v {
				t.Fatalf("version record %x does not survive a round trip: %+v, %+v", body, v, again)
			}
		}
		if f, ok := decodeFeeds(body); ok {
			if again, ok := decodeFeeds(f.append(nil)); !ok || again != f {
				t.Fatalf("feed state %x does not survive a round trip: %+v, %+v", body, f, again)
			}
		}
		decodeKeyRecord("vk_FEKZdMs2UQRi", body)
		decodeNodeRecord(body)
		var bk bucket
		parseBucket(body, 1, &bk)
		decodePrices(body)
		compilePlan(body)
	})
}
