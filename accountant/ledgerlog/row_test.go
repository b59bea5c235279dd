package ledgerlog

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

var nasty = []string{"", "tt_abc", "org:acme/team:ml", "<script>&", "quote\"back\\slash", "tab\tnl\ncr\r", "\x00\x1f\x7f",
	"héllo ✓", "\u2028\u2029", "bad\xffutf8", "/v1/chat/completions"}

func randString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return nasty[r.IntN(len(nasty))]
	}
	var b strings.Builder
	for range r.IntN(12) {
		b.WriteString(nasty[r.IntN(len(nasty))][:0])
		b.WriteByte(byte(r.IntN(256)))
	}
	return b.String()
}

func randRow(r *rand.Rand) ledger.Row {
	refs := func() []ledger.Ref {
		switch r.IntN(3) {
		case 0:
			return nil
		case 1:
			return []ledger.Ref{}
		}
		return []ledger.Ref{{LimitID: randString(r), LimitType: "rpm", Node: randString(r)}, {}}
	}
	row := ledger.Row{
		RequestID: randString(r), KID: randString(r), Node: randString(r), Endpoint: randString(r),
		Provider: randString(r), Model: randString(r), Served: randString(r), Stream: r.IntN(2) == 0,
		Start: time.Unix(r.Int64N(4e9), r.Int64N(1e9)).UTC(), End: time.Unix(r.Int64N(4e9), 0).UTC(),
		Usage:  ledger.Usage{Input: r.Int64() - r.Int64(), Output: r.Int64N(100), CachedInput: r.Int64N(5), Reasoning: -1, Total: r.Int64()},
		Status: r.IntN(600), Decision: ledger.Decision(randString(r)), ErrorType: randString(r),
		Shadow: refs(), Breached: refs(), Estimated: ledger.Estimated{Input: r.IntN(2) == 0, Output: r.IntN(2) == 0},
		Replica: randString(r),
	}
	if r.IntN(2) == 0 {
		row.RefusedBy = &ledger.Ref{LimitID: randString(r), Node: randString(r)}
	}
	if r.IntN(2) == 0 {
		row.Suspended = []string{randString(r), randString(r)}
	} else if r.IntN(2) == 0 {
		row.Suspended = []string{}
	}
	if r.IntN(2) == 0 {
		row.Cost = &ledger.Cost{Nanos: r.Int64(), Unpriced: r.IntN(2) == 0, Estimated: r.IntN(2) == 0}
	}
	if r.IntN(5) == 0 {
		row.Start = time.Time{}
	}
	return row
}

// TestAppendRowMatchesEncodingJSON checks the hand-written encoder against
// encoding/json byte for byte, and the parser against encoding/json's
// decoding of the same bytes.
func TestAppendRowMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		row := randRow(r)
		want, err := json.Marshal(&row)
		if err != nil {
			t.Fatal(err)
		}
		got := AppendRow(nil, &row)
		if !bytes.Equal(got, append(want, '\n')) {
			t.Fatalf("row %d:\n got %s\nwant %s", i, got, want)
		}
		var ref ledger.Row
		if err := json.Unmarshal(want, &ref); err != nil {
			t.Fatal(err)
		}
		parsed, err := ParseRow(got[:len(got)-1])
		if err != nil {
			t.Fatalf("row %d: ParseRow(%s): %v", i, got, err)
		}
		if !reflect.DeepEqual(parsed, ref) {
			t.Fatalf("row %d: ParseRow differs from encoding/json:\n got %+v\nwant %+v", i, parsed, ref)
		}
	}
}

func TestParseRowErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"request_id":`, "not a ledger row: the line is not valid JSON"},
		{`[1]`, "not a ledger row: the line is not a JSON object"},
		{`{"request_id":5}`, "not a ledger row: request_id: want a string, got a number"},
		{`{"end":"yesterday"}`, `not a ledger row: end: want an RFC 3339 time, got "yesterday"`},
		{`{"usage":{"input":1.5}}`, "not a ledger row: usage.input: want an integer, got 1.5"},
		{`{"usage":[]}`, "not a ledger row: usage: want an object, got an array"},
		{`{"stream":"yes"}`, "not a ledger row: stream: want true or false, got a string"},
	} {
		_, err := ParseRow([]byte(tc.in))
		if err == nil || err.Error() != tc.want {
			t.Errorf("ParseRow(%s) = %v, want %s", tc.in, err, tc.want)
		}
	}
	// encoding/json rejects these too.
	for _, in := range []string{`{"request_id":5}`, `{"usage":{"input":1.5}}`, `{"stream":"yes"}`} {
		var r ledger.Row
		if json.Unmarshal([]byte(in), &r) == nil {
			t.Errorf("encoding/json accepts %s", in)
		}
	}
}

func FuzzParseRow(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		row := randRow(r)
		f.Add(AppendRow(nil, &row))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		row, err := ParseRow(b)
		if err != nil {
			return
		}
		// Whatever parses re-encodes to something that parses to the same row.
		again, err := ParseRow(bytes.TrimSuffix(AppendRow(nil, &row), []byte("\n")))
		if err != nil {
			t.Fatalf("re-encoded row does not parse: %v", err)
		}
		if !reflect.DeepEqual(again.Usage, row.Usage) || again.RequestID != row.RequestID && strings.ToValidUTF8(row.RequestID, "\ufffd") != again.RequestID {
			t.Fatalf("round trip changed the row")
		}
	})
}
