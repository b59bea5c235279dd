package wire

import (
	"encoding/base32"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestSeedRequestIDs(t *testing.T) {
	enc := base32.StdEncoding.WithPadding(base32.NoPadding)
	for _, id := range seedRequestIDs {
		if !ValidRequestID(id) {
			t.Errorf("%s: not valid", id)
		}
		raw, err := enc.DecodeString(strings.ToUpper(id[3:]))
		if err != nil || len(raw) != 16 {
			t.Fatalf("%s: %v", id, err)
		}
		if got := NewRequestID([16]byte(raw)); got != id {
			t.Errorf("NewRequestID(%x) = %s; want %s", raw, got, id)
		}
	}
}

func TestNewRequestID(t *testing.T) {
	enc := base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
	for i := 0; i < 256; i++ {
		var r [16]byte
		for j := range r {
			r[j] = byte(i*31 + j*7)
		}
		got := NewRequestID(r)
		if want := "tt_" + enc.EncodeToString(r[:]); got != want {
			t.Fatalf("NewRequestID(%x) = %s; want %s", r, got, want)
		}
		if !ValidRequestID(got) {
			t.Fatalf("%s is not valid", got)
		}
	}
	for _, bad := range []string{"", "tt_", "tt_i3f2naenug5aanctu6pcjrofc", "tt_i3f2naenug5aanctu6pcjrofcyy",
		"tx_i3f2naenug5aanctu6pcjrofcy", "tt_I3f2naenug5aanctu6pcjrofcy", "tt_i3f2naenug5aanctu6pcjrof1y",
		"tt_i3f2naenug5aanctu6pcjrofcz"} { // z: non-zero padding bits
		if ValidRequestID(bad) {
			t.Errorf("ValidRequestID(%q) = true", bad)
		}
	}
}

func TestUSD(t *testing.T) {
	for _, c := range []struct {
		nanos int64
		s     string
	}{
		{0, "0"}, {12600, "0.0000126"}, {1000, "0.000001"}, {1000 * NanosPerUSD, "1000"},
		{5000 * NanosPerUSD, "5000"}, {1, "0.000000001"}, {1_500_000_000, "1.5"}, {-2_500_000_000, "-2.5"},
		{12_345_678_901, "12.345678901"}, {math.MaxInt64, "9223372036.854775807"}, {math.MinInt64, "-9223372036.854775808"},
	} {
		if got := FormatUSD(c.nanos); got != c.s {
			t.Errorf("FormatUSD(%d) = %s; want %s", c.nanos, got, c.s)
		}
		back, err := ParseUSD(c.s)
		if err != nil || back != c.nanos {
			t.Errorf("ParseUSD(%s) = %d, %v; want %d", c.s, back, err, c.nanos)
		}
	}
	if n, err := ParseUSD("0.50"); err != nil || n != 500_000_000 {
		t.Errorf("ParseUSD(0.50) = %d, %v", n, err)
	}
	for in, want := range map[string]string{
		"":                      `wire: usd amount "": want a decimal number such as 0.5 or 12`,
		"1e-6":                  `wire: usd amount "1e-6": want a decimal number such as 0.5 or 12`,
		".5":                    `wire: usd amount ".5": want a decimal number such as 0.5 or 12`,
		"5.":                    `wire: usd amount "5.": want a decimal number such as 0.5 or 12`,
		"01":                    `wire: usd amount "01": leading zero`,
		"0.0000000001":          `wire: usd amount "0.0000000001": more than 9 decimals (finer than a nanodollar)`,
		"9223372037":            `wire: usd amount "9223372037": out of range`,
		"9223372036.854775808":  `wire: usd amount "9223372036.854775808": out of range`,
		"-9223372036.854775809": `wire: usd amount "-9223372036.854775809": out of range`,
		"+1":                    `wire: usd amount "+1": want a decimal number such as 0.5 or 12`,
	} {
		if _, err := ParseUSD(in); err == nil || err.Error() != want {
			t.Errorf("ParseUSD(%q) error %v; want %s", in, err, want)
		}
	}
}

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{0: 0, -time.Second: 0, time.Nanosecond: 1, 20 * time.Second: 20,
		38346 * time.Millisecond: 39, 1912510 * time.Second: 1912510} {
		if got := Seconds(d); got != want {
			t.Errorf("Seconds(%v) = %d; want %d", d, got, want)
		}
	}
}

func FuzzUSD(f *testing.F) {
	f.Add(int64(12600), "0.0000126")
	f.Add(int64(math.MinInt64), "-1.000000000")
	f.Fuzz(func(t *testing.T, nanos int64, s string) {
		text := FormatUSD(nanos)
		back, err := ParseUSD(text)
		if err != nil || back != nanos {
			t.Fatalf("%d renders as %s, which parses to %d, %v", nanos, text, back, err)
		}
		if strings.ContainsAny(text, "eE+") || (strings.Contains(text, ".") && strings.HasSuffix(text, "0")) {
			t.Fatalf("%d renders as %s", nanos, text)
		}
		if v, err := ParseUSD(s); err == nil {
			var f float64
			if json.Unmarshal([]byte(s), &f) != nil {
				t.Fatalf("ParseUSD accepted %q, which is not a JSON number", s)
			}
			_ = v
		}
	})
}

func TestLimitTypes(t *testing.T) {
	for _, c := range []struct {
		t               LimitType
		unit, errType   string
		class           string
		settled, approx bool
	}{
		{BudgetUSD, "usd", "budget_exceeded", "spend", true, true},
		{QuotaTokens, "tokens", "quota_exhausted", "count", true, true},
		{QuotaRequests, "requests", "quota_exhausted", "count", true, true},
		{RPM, "requests", "rate_limited", "count", false, false},
		{TPM, "tokens", "rate_limited", "count", false, true},
		{Concurrency, "concurrent-requests", "concurrency_exceeded", "count", false, false},
	} {
		if c.t.Unit() != c.unit || c.t.ErrorType() != c.errType || c.t.Class() != c.class ||
			c.t.Settled() != c.settled || c.t.Approximate() != c.approx {
			t.Errorf("%s: %s %s %s %v %v", c.t, c.t.Unit(), c.t.ErrorType(), c.t.Class(), c.t.Settled(), c.t.Approximate())
		}
	}
}

func TestPostureLabel(t *testing.T) {
	for p, want := range map[Posture]string{
		{Mode: "on", Enforce: "hard"}:     "enforcing",
		{}:                                "enforcing",
		{Mode: "on", Enforce: "soft"}:     "soft",
		{Mode: "shadow", Enforce: "soft"}: "alert_only",
		{Mode: "off", Enforce: "hard"}:    "off",
	} {
		if got := p.Label(); got != want {
			t.Errorf("%+v: %s; want %s", p, got, want)
		}
	}
}

func TestRefusalPathAllocations(t *testing.T) {
	r := budgetRefusal()
	rpm := rpmRefusal()
	body := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { body = r.AppendBody(body[:0]) }); n != 0 {
		t.Errorf("budget AppendBody: %v allocations; want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { body = rpm.AppendBody(body[:0]) }); n != 0 {
		t.Errorf("rpm AppendBody: %v allocations; want 0", n)
	}
	// Ratelimit, Retry-After and Retry-After-Ms share one string.
	rpm.Wait = 19250 * time.Millisecond
	hdr := make([][2]string, 0, 12)
	if n := testing.AllocsPerRun(100, func() { hdr = rpm.AppendHeaders(hdr[:0]) }); n != 1 {
		t.Errorf("rpm AppendHeaders: %v allocations; want 1", n)
	}
	if got := rpm.Headers(); got[6] != [2]string{HeaderRetryAfterMs, "19250"} || got[2] != [2]string{HeaderRetryAfter, "20"} {
		t.Errorf("rpm headers %v", got)
	}
	me := seedMeDoc()
	if n := testing.AllocsPerRun(100, func() { body = me.AppendJSON(body[:0]) }); n > 3 {
		t.Errorf("Me.AppendJSON: %v allocations; want at most 3", n)
	}
}
