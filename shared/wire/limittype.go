package wire

// LimitType is a limit type as its name appears on the wire (limit_type,
// type).
type LimitType string

// The six limit types.
const (
	BudgetUSD     LimitType = "budget_usd"
	QuotaTokens   LimitType = "quota_tokens"
	QuotaRequests LimitType = "quota_requests"
	RPM           LimitType = "rpm"
	TPM           LimitType = "tpm"
	Concurrency   LimitType = "concurrency"
)

// error.type values of limit breaches (seed 002). rpm and tpm share
// rate_limited: the type names the family, refused_by.limit_type the limit.
const (
	TypeBudgetExceeded      = "budget_exceeded"
	TypeQuotaExhausted      = "quota_exhausted"
	TypeRateLimited         = "rate_limited"
	TypeConcurrencyExceeded = "concurrency_exceeded"
	TypeCostUnfittable      = "quota_cost_unfittable"
)

// Unit returns the unit the type counts in: usd, tokens, requests or
// concurrent-requests; "" for an unknown type.
func (t LimitType) Unit() string {
	switch t {
	case BudgetUSD:
		return "usd"
	case QuotaTokens, TPM:
		return "tokens"
	case QuotaRequests, RPM:
		return "requests"
	case Concurrency:
		return "concurrent-requests"
	}
	return ""
}

// ErrorType returns the error.type of a breach of this type.
func (t LimitType) ErrorType() string {
	switch t {
	case BudgetUSD:
		return TypeBudgetExceeded
	case QuotaTokens, QuotaRequests:
		return TypeQuotaExhausted
	case RPM, TPM:
		return TypeRateLimited
	case Concurrency:
		return TypeConcurrencyExceeded
	}
	return "limit_exceeded"
}

// Class returns the shape of the type's amounts in /tt/v1/me and the
// limits document: "spend" (dollar objects) for budget_usd, "count" for the
// others.
func (t LimitType) Class() string {
	if t == BudgetUSD {
		return "spend"
	}
	return "count"
}

// Settled reports whether the type is LedgerSettled (budget_usd,
// quota_tokens, quota_requests): counted from ledger rows after the fact,
// over a calendar period.
func (t LimitType) Settled() bool {
	return t == BudgetUSD || t == QuotaTokens || t == QuotaRequests
}

// Approximate reports whether the type's number at the gate is an
// approximation: LedgerSettled lags the ledger, a tpm reserve is an
// estimate. rpm and concurrency are exact.
func (t LimitType) Approximate() bool { return t.Settled() || t == TPM }
