package config

import (
	"strconv"
	"strings"
	"testing"
)

// benchDocument is a plugin configuration's governance block with n
// limits of every shape, as JSON.
func benchDocument(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"governance":{"enabled":true,"require_key":true,"tenants":[{"org":"acme","teams":["ml","search"],"users":{"ml":["dev1","dev2"],"search":["s1"]}}],"limits":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		id := strconv.Itoa(i)
		b.WriteString(`{"id":"budget_` + id + `","attach":{"level":"team"},"type":"budget_usd","amount_usd":1250.75,"period":"month",` +
			`"match":{"model":"gpt-4o*","provider":"openai"},"posture":{"mode":"on","thresholds":[0.5,0.8,1]}},` +
			`{"id":"rpm_` + id + `","attach":{"node":"org:acme/team:ml"},"type":"rpm","amount":600,"period":"1m","burst":60},` +
			`{"id":"tokens_` + id + `","attach":{"level":"user"},"type":"quota_tokens","amount":2000000,"period":"day","override":{"allow":true,"max_amount":5000000}}`)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

// BenchmarkParseJSON reads a governance block of 30 limits (about 6 KB)
// into the generic tree, decodes it onto the schema, and encodes it
// canonically (the plan hash's input): what a filter does at plugin start
// and on each plan sync.
func BenchmarkParseJSON(b *testing.B) {
	doc := benchDocument(10)
	b.Run("tree", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		loop(b, func() error { _, err := ParseJSON(doc); return err })
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		loop(b, func() error { _, err := DecodeJSON(doc); return err })
	})
	f, err := DecodeJSON(doc)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("canonical", func(b *testing.B) {
		loop(b, func() error { _, err := CanonicalJSON(f.Governance); return err })
	})
}

// loop reports allocations and runs f b.N times, failing at its first
// error.
func loop(b *testing.B, f func() error) {
	b.ReportAllocs()
	for b.Loop() {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
}
