package wire

import "github.com/tokentriage/tokentriage/shared/jsontok"

// Posture is a limit's posture as /tt/v1/me shows it: mode on|shadow|off,
// enforce hard|soft, fail open|closed.
type Posture struct {
	Mode    string
	Enforce string
	Fail    string
}

// Label returns the one-word posture of the limits document: "off" when
// the mode is off, "alert_only" in shadow (the would-refuse is recorded and
// the request admitted), "soft" when on and soft-enforced (a breach is
// admitted and recorded as a soft breach), "enforcing" when on and hard.
func (p Posture) Label() string {
	switch {
	case p.Mode == "off":
		return "off"
	case p.Mode == "shadow":
		return "alert_only"
	case p.Enforce == "soft":
		return "soft"
	}
	return "enforcing"
}

func (p Posture) appendJSON(dst []byte) []byte {
	dst = jsontok.AppendKeyString(dst, `{"mode":`, p.Mode)
	dst = jsontok.AppendKeyString(dst, `,"enforce":`, p.Enforce)
	dst = jsontok.AppendKeyString(dst, `,"fail":`, p.Fail)
	return append(dst, '}')
}
