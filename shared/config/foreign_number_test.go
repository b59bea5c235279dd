//go:build !wasip1

package config

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDecodeForeignNumber: a tree built by encoding/json with UseNumber
// decodes as the parser's own tree does.
func TestDecodeForeignNumber(t *testing.T) {
	tree := map[string]any{"governance": map[string]any{"limits": []any{
		map[string]any{"amount": json.Number("3e2"), "amount_usd": json.Number("0.000001"), "posture": map[string]any{"thresholds": []any{json.Number("0.5")}}},
	}}}
	f, err := DecodeFile(tree)
	if err != nil {
		t.Fatal(err)
	}
	l := f.Governance.Limits[0]
	if *l.Amount != 300 || l.AmountUSD.Nanos != 1000 || l.Posture.Thresholds[0] != 0.5 {
		t.Fatalf("%+v", l)
	}
	if _, err := DecodeFile(map[string]any{"governance": map[string]any{"limits": []any{map[string]any{"id": json.Number("7")}}}}); err == nil ||
		!strings.HasSuffix(err.Error(), "expected a string, got number 7 (quote it to make it a string)") {
		t.Fatalf("err = %v", err)
	}
}
