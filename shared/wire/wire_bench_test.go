package wire

import (
	"testing"
)

func BenchmarkRefusal(b *testing.B) {
	r := budgetRefusal()
	body := make([]byte, 0, 1024)
	hdr := make([][2]string, 0, 8)
	b.ReportAllocs()
	for b.Loop() {
		body = r.AppendBody(body[:0])
		hdr = r.AppendHeaders(hdr[:0])
	}
}

func BenchmarkDisclosure(b *testing.B) {
	d := Disclosure{Requests: Policy{LimitID: "team_rpm", Quota: 300, Window: 60e9, Remaining: 59},
		Tokens: Policy{LimitID: "team_tpm", Quota: 20000, Window: 60e9, Remaining: 3609}}
	hdr := make([][2]string, 0, 8)
	b.ReportAllocs()
	for b.Loop() {
		hdr = d.AppendHeaders(hdr[:0])
	}
}

func BenchmarkMe(b *testing.B) {
	me := seedMeDoc()
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = me.AppendJSON(buf[:0])
	}
}

func BenchmarkNewRequestID(b *testing.B) {
	var r [16]byte
	b.ReportAllocs()
	for b.Loop() {
		r[0]++
		_ = NewRequestID(r)
	}
}
