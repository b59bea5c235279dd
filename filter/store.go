package filter

import (
	"errors"
	"time"
)

// Store is the host's shared data as the gate sees it: one key-value space
// per vm_id, shared by every worker VM of the host process, with Envoy's
// compare-and-swap rules: Get returns the value and its cas; Set with a
// non-zero cas fails (swapped false) when the key changed since; Set on a
// missing key always succeeds whatever the cas. The value Get returns may
// be overwritten by the next Get: callers copy what they keep.
type Store interface {
	Get(key string) (value []byte, cas uint32, found bool, err error)
	Set(key string, value []byte, cas uint32) (swapped bool, err error)
}

// Caller makes HTTP callouts to a named upstream cluster. The callback runs
// later, on the root context, never inside Call. status is 0 when the call
// failed without an answer.
type Caller interface {
	Call(method, path string, headers [][2]string, body []byte, timeout time.Duration,
		cb func(status int, body []byte)) error
}

// PluginCaller is a Caller that can also make a call whose answer runs on
// the plugin (root) context whatever context makes it, so a stream may
// hand its ledger row to the accountant as it ends (ledgerq.go).
type PluginCaller interface {
	Caller
	CallForPlugin(method, path string, headers [][2]string, body []byte, timeout time.Duration,
		cb func(status int, body []byte)) error
}

// maxCASRetries bounds every compare-and-swap loop. A loop that exhausts it
// leaves its limit uncheckable for this request (suspended, or 503 under
// fail: closed with enforce: hard) rather than spinning.
const maxCASRetries = 16

// errContention is returned when a cell stayed contended for maxCASRetries.
var errContention = errors.New("shared-data cell stayed contended for 16 compare-and-swap attempts")
