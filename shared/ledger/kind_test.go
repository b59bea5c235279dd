package ledger

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// kindRows are one row of each new kind, as the filter and the accountant
// write them.
func kindRows() map[string]Row {
	startRow := Row{RequestID: "tt_e6gbpncee32dbu7y5jpsfr4ax4", Start: start, End: start, KID: "vk_FEKZdMs2UQRi",
		Node: "org:acme/team:ml/user:dev1", Endpoint: "/v1/chat/completions", Provider: "openai", Model: "gpt-4o-mini", Stream: true,
		Usage: Usage{Input: 7, Output: 16384, Total: 16391}, Decision: Admitted, Estimated: Estimated{true, true}, Replica: "r-1",
		Kind: KindStart, LeaseTTLMS: 900000}
	closeRow := startRow
	closeRow.Kind, closeRow.LeaseTTLMS, closeRow.End = KindClose, 0, start.Add(15*time.Minute)
	closeRow.Cost = &Cost{Nanos: 9831000, Estimated: true}
	late := fullRow()
	late.RequestID, late.Status, late.Decision, late.ErrorType, late.RefusedBy = startRow.RequestID, 200, Admitted, "", nil
	late.Free, late.GatewayEnd = false, time.Time{}
	late.Replaced = &Replaced{End: closeRow.End, Usage: closeRow.Usage, Cost: closeRow.Cost}
	summary := Row{RequestID: "tt_i3f2naenug5aanctu6pcjrofcy", Start: start, End: end, KID: "vk_FEKZdMs2UQRi", Node: "org:acme",
		Endpoint: "/v1/embeddings", Model: "text-embedding-3-small", Usage: Usage{Input: 4000, Total: 4000}, Status: 200, Decision: Admitted,
		Kind: KindSummary, Count: 1000, Cut: []string{"model"}}
	return map[string]Row{"row_start": startRow, "row_close": closeRow, "row_late_end": late, "row_summary": summary}
}

// TestKindGoldens: the wire form of each kind; the members a kind adds are
// written only when set, so every row written before kinds is written the
// same way still (row_full and row_minimal are unchanged).
func TestKindGoldens(t *testing.T) {
	for name, r := range kindRows() {
		checkGolden(t, name, append(r.AppendJSON(nil), '\n'))
		got, err := ParseRow(r.AppendJSON(nil))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := normalize(r)
		if want.Replaced != nil {
			p := *want.Replaced
			p.End = p.End.UTC()
			want.Replaced = &p
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s round trip:\n got %+v\nwant %+v", name, got, want)
		}
	}
}

// TestOlderRowsStillParse: a ledger written before kinds (every line of
// the goldens of the time, and rows of every decision) reads back as
// finished requests of one request each.
func TestOlderRowsStillParse(t *testing.T) {
	for _, name := range []string{"row_full", "row_minimal"} {
		b, err := os.ReadFile("testdata/" + name + ".golden")
		if err != nil {
			t.Fatal(err)
		}
		r, err := ParseRow(bytes.TrimSpace(b))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Kind != KindEnd || r.Requests() != 1 || r.Count != 0 {
			t.Errorf("%s: kind %q, %d requests", name, r.Kind, r.Requests())
		}
	}
}

func TestRequests(t *testing.T) {
	rows := kindRows()
	for name, want := range map[string]int64{"row_start": 0, "row_close": 1, "row_late_end": 1, "row_summary": 1000} {
		r := rows[name]
		if got := r.Requests(); got != want {
			t.Errorf("%s: %d requests, want %d", name, got, want)
		}
	}
}

func TestParseKindErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{with(`"kind":"finish"`), `ledger: row field "kind": "finish" is not one of start, summary, close (or absent, a finished request)`},
		{with(`"kind":1`), `ledger: row field "kind": want a string, got 1`},
		{with(`"count":0`), `ledger: row field "count": 0; a summary stands for at least one request`},
		{with(`"count":-2`), `ledger: row field "count": negative -2; counts are never below 0`},
		{with(`"cut":"model"`), `ledger: row field "cut": want a list, got "model"`},
		{with(`"replaced":{"usage":{}}`), `ledger: row field "replaced.end": missing; every row carries it`},
		{with(`"replaced":{"end":"2026-08-09T20:44:51Z","cost":{"nanos":-1}}`), `ledger: row field "replaced.nanos": negative -1; counts are never below 0`},
	} {
		_, err := ParseRow([]byte(c.in))
		if err == nil || err.Error() != c.want {
			t.Errorf("ParseRow(%s):\n got %v\nwant %s", c.in, err, c.want)
		}
	}
}

// TestBound: a row with a 7.8 MB model name and lists of thousands is held
// to MaxRowBytes, each member it shortened named in cut; what is within
// the bounds is left alone, and a cut row parses.
func TestBound(t *testing.T) {
	r := fullRow()
	if r.Bound() || r.Cut != nil {
		t.Fatalf("an ordinary row was cut: %v", r.Cut)
	}
	huge := strings.Repeat("g", 7_800_000)
	r.Model = huge
	r.Endpoint = "/v1/" + strings.Repeat("日", 2000) // cut inside a rune
	for i := 0; i < 5000; i++ {
		r.Suspended = append(r.Suspended, strings.Repeat("s", 900))
		r.Shadow = append(r.Shadow, Ref{LimitID: strings.Repeat("\x01", 1100), LimitType: "rpm", Node: "n"})
	}
	shadow := r.Shadow
	if !r.Bound() {
		t.Fatal("Bound cut nothing")
	}
	b := r.AppendJSON(nil)
	if len(b) > MaxRowBytes {
		t.Fatalf("bounded row is %d bytes, over %d", len(b), MaxRowBytes)
	}
	if len(r.Model) != MaxFieldBytes || len(r.Endpoint) > MaxFieldBytes || !strings.HasPrefix(huge, r.Model) {
		t.Errorf("model %d bytes, endpoint %d bytes", len(r.Model), len(r.Endpoint))
	}
	if want := []string{"endpoint", "model", "shadow", "suspended"}; !reflect.DeepEqual(r.Cut, want) {
		t.Errorf("cut %v, want %v", r.Cut, want)
	}
	if shadow[1].LimitID != strings.Repeat("\x01", 1100) {
		t.Error("Bound changed the caller's list")
	}
	got, err := ParseRow(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Cut, r.Cut) || got.Model != r.Model {
		t.Errorf("parsed cut %v model %d bytes", got.Cut, len(got.Model))
	}
}

// TestBoundProperty: whatever the row, Bound holds it to MaxRowBytes.
func TestBoundProperty(t *testing.T) {
	for i, n := range []int{0, 100, 1000, 5000, 70000} {
		r := fullRow()
		s := strings.Repeat("\u2028\"", n/4)
		r.KID, r.Node, r.Model, r.Served, r.Replica, r.ErrorType = s, s, s, s, s, s
		for j := 0; j < n/50; j++ {
			r.Breached = append(r.Breached, Ref{LimitID: s, LimitType: s, Node: s})
			r.Holds = append(r.Holds, s)
			r.Reconcile = append(r.Reconcile, s)
		}
		r.Bound()
		if got := len(r.AppendJSON(nil)); got > MaxRowBytes {
			t.Errorf("case %d: %d bytes after Bound", i, got)
		}
	}
}

func BenchmarkBoundOrdinaryRow(b *testing.B) {
	r := fullRow()
	for b.Loop() {
		r.Bound()
	}
}
