package accountant

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// MaxAlertsBytes bounds one POST to syncwire.AlertsPath.
const MaxAlertsBytes = 1 << 20

// serveAlerts takes the threshold alerts the filters raise for the limits
// they count at the gate (rpm, tpm, concurrency), one syncwire.GateAlert
// JSON line each, and logs, counts and posts them to the alert webhook like
// the accountant's own. A line it cannot read is reported and skipped.
func (s *Server) serveAlerts(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, MaxAlertsBytes, fmt.Sprintf("alerts: body is larger than %d bytes", MaxAlertsBytes), "alerts: reading the body")
	if !ok {
		return
	}
	var ack struct {
		Accepted int      `json:"accepted"`
		Rejected int      `json:"rejected"`
		Errors   []string `json:"errors,omitempty"`
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, MaxAlertsBytes)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var g syncwire.GateAlert
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		err := dec.Decode(&g)
		var ev AlertEvent
		if err == nil {
			ev, err = GateAlertEvent(g)
		}
		if err != nil {
			ack.Rejected++
			if len(ack.Errors) < 16 {
				ack.Errors = append(ack.Errors, fmt.Sprintf("line %d: %v", n, err))
			}
			continue
		}
		s.alerts.emitEvent(ev)
		ack.Accepted++
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(ack)
}
