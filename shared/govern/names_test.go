package govern_test

import (
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// TestTypeTable is seed 002's "What each type caps" table.
func TestTypeTable(t *testing.T) {
	tests := []struct {
		name      string
		class     string
		unit      string
		errorType string
		wire      string
		gate      govern.Gate
	}{
		{"budget_usd", "LedgerSettled", "usd", "budget_exceeded", "spend", govern.Gate2},
		{"quota_tokens", "LedgerSettled", "tokens", "quota_exhausted", "count", govern.Gate2},
		{"quota_requests", "LedgerSettled", "requests", "quota_exhausted", "count", govern.Gate2},
		{"rpm", "AdmissionCounted", "requests", "rate_limited", "count", govern.Gate1},
		{"tpm", "ReserveReconcile", "tokens", "rate_limited", "count", govern.Gate2},
		{"concurrency", "InflightLease", "concurrent-requests", "concurrency_exceeded", "count", govern.Gate1},
	}
	for i, tc := range tests {
		typ, ok := govern.ParseType(tc.name)
		if !ok || typ != govern.Type(i+1) || typ.String() != tc.name {
			t.Fatalf("ParseType(%q) = %v, %t", tc.name, typ, ok)
		}
		if typ.Class().String() != tc.class || typ.Unit() != tc.unit || typ.ErrorType() != tc.errorType || typ.WireClass() != tc.wire || typ.Gate() != tc.gate {
			t.Errorf("%s: %s %s %s %s %s", tc.name, typ.Class(), typ.Unit(), typ.ErrorType(), typ.WireClass(), typ.Gate())
		}
		if typ.Overridable() != (tc.class == "LedgerSettled") {
			t.Errorf("%s: Overridable %t", tc.name, typ.Overridable())
		}
	}
	if _, ok := govern.ParseType("rps"); ok {
		t.Error("rps parsed")
	}
	if govern.Type(0).String() != "unknown" || govern.Type(99).Unit() != "" {
		t.Error("out-of-range type")
	}
}

func TestPeriodString(t *testing.T) {
	tests := []struct {
		p    govern.Period
		want string
	}{
		{govern.Period{Calendar: calendar.Day}, "day"},
		{govern.Period{Calendar: calendar.Week}, "week"},
		{govern.Period{Calendar: calendar.Month}, "month"},
		{govern.Period{Window: time.Minute}, "1m0s"},
		{govern.Period{Window: time.Second}, "1s"},
		{govern.Period{}, ""},
	}
	for _, tc := range tests {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.p, got, tc.want)
		}
	}
}

func TestPostureLabel(t *testing.T) {
	tests := []struct {
		m    govern.Mode
		e    govern.Enforce
		want string
	}{
		{govern.ModeOn, govern.EnforceHard, "enforcing"},
		{govern.ModeOn, govern.EnforceSoft, "soft"},
		{govern.ModeShadow, govern.EnforceHard, "alert_only"},
		{govern.ModeShadow, govern.EnforceSoft, "alert_only"},
		{govern.ModeOff, govern.EnforceHard, "off"},
	}
	for _, tc := range tests {
		if got := govern.PostureLabel(tc.m, tc.e); got != tc.want {
			t.Errorf("%s/%s: %q, want %q", tc.m, tc.e, got, tc.want)
		}
	}
	if govern.ModeShadow.String() != "shadow" || govern.EnforceSoft.String() != "soft" || govern.FailClosed.String() != "closed" || govern.StoreShare.String() != "share" {
		t.Error("enum strings")
	}
}
