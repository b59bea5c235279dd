package devserver

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/tokentriage/tokentriage/wasmtest"
)

// GuestProfilePath is where dev serves the embedded gateway's guest
// profile, on the accountant's address, to the admin token only.
const GuestProfilePath = "/debug/tt/guest"

// guestProfile is the answer of GuestProfilePath: what each guest export
// of the filter cost since the start, and the slowest recent calls, each
// with the VM that ran it (wasmtest.Host.Profile). Times are in
// microseconds.
type guestProfile struct {
	Exports []guestExport `json:"exports"`
	Slow    []guestSlow   `json:"slow_calls"`
	// SlowAtUS is the least time a call held its VM to be listed.
	SlowAtUS int64 `json:"slow_at_us"`
}

type guestExport struct {
	Export  string  `json:"export"`
	Calls   int64   `json:"calls"`
	TotalUS int64   `json:"total_us"`
	MeanUS  float64 `json:"mean_us"`
	MaxUS   int64   `json:"max_us"`
}

type guestSlow struct {
	At     time.Time `json:"at"`
	VM     string    `json:"vm"`
	Export string    `json:"export"`
	TookUS int64     `json:"took_us"`
	Pages  uint32    `json:"pages"`
}

// serveGuestProfile answers GuestProfilePath from the host h returns (nil
// until the gateway has started).
func serveGuestProfile(h func() *wasmtest.Host) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := h()
		if host == nil {
			http.Error(w, "the gateway has not started yet", http.StatusServiceUnavailable)
			return
		}
		exports, slow := host.Profile()
		p := guestProfile{Exports: []guestExport{}, Slow: []guestSlow{}, SlowAtUS: wasmtest.SlowCallAt.Microseconds()}
		for _, e := range exports {
			g := guestExport{Export: e.Export, Calls: e.Calls, TotalUS: e.Total.Microseconds(), MaxUS: e.Max.Microseconds()}
			if e.Calls > 0 {
				g.MeanUS = float64(e.Total.Nanoseconds()) / float64(e.Calls) / 1e3
			}
			p.Exports = append(p.Exports, g)
		}
		for _, c := range slow {
			p.Slow = append(p.Slow, guestSlow{At: c.At.UTC(), VM: c.VM, Export: c.Export, TookUS: c.Took.Microseconds(), Pages: c.Pages})
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(p)
	})
}
