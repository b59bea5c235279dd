package runtime

import (
	"fmt"
	"strings"

	"github.com/tokentriage/tokentriage/shared/govern"
)

// typeName is a limit type's config spelling.
func typeName(t govern.Type) string {
	switch t {
	case govern.BudgetUSD:
		return "budget_usd"
	case govern.QuotaTokens:
		return "quota_tokens"
	case govern.QuotaRequests:
		return "quota_requests"
	case govern.RPM:
		return "rpm"
	case govern.TPM:
		return "tpm"
	case govern.Concurrency:
		return "concurrency"
	}
	return fmt.Sprintf("type(%d)", t)
}

// dollars renders nanodollars as a decimal dollar figure with no more
// places than it needs.
func dollars(n int64) string {
	sign := ""
	u := uint64(n)
	if n < 0 {
		sign, u = "-", uint64(-(n+1))+1
	}
	s := fmt.Sprintf("%d", u/1e9)
	if f := u % 1e9; f != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%09d", f), "0")
	}
	return sign + s
}
