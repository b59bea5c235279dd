package ledger

import (
	"encoding/json"
	"flag"
	"math/rand"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/quick"
	"time"

	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/wire"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", name+".golden"), got, *update)
}

var (
	start = time.Date(2026, 8, 9, 20, 44, 50, 123456789, time.UTC)
	end   = start.Add(1500*time.Millisecond + 7)
)

func fullRow() Row {
	return Row{
		RequestID:        "tt_i3f2naenug5aanctu6pcjrofcy",
		Start:            start.In(time.FixedZone("JST", 9*3600)), // written in UTC whatever the zone
		End:              end,
		KID:              "vk_FEKZdMs2UQRi",
		Node:             "org:acme/team:ml/user:dev1",
		Endpoint:         "/v1/chat/completions",
		Provider:         "openai",
		Model:            "gpt-4o-mini",
		Served:           "gpt-4o-mini-2024-07-18",
		Stream:           true,
		Usage:            Usage{Input: 14, Output: 20, CachedInput: 4, Reasoning: 2, Total: 34},
		Status:           429,
		Decision:         Refused,
		ErrorType:        "budget_exceeded",
		RefusedBy:        &Ref{LimitID: "org_monthly_budget", LimitType: "budget_usd", Node: "org:acme"},
		Shadow:           []Ref{{LimitID: "team_rpm", LimitType: "rpm", Node: "org:acme/team:ml"}},
		Breached:         []Ref{{LimitID: "team_tpm", LimitType: "tpm", Node: "org:acme/team:ml"}, {LimitID: "global_rpm", LimitType: "rpm", Node: "__global"}},
		Suspended:        []string{"ml_daily", "team_monthly_tokens"},
		Estimated:        Estimated{Input: true, Output: true},
		Replica:          "envoy-7f9c\"east\"",
		ServedOutOfScope: true,
		UsageClamped:     true,
		Free:             true,
		GatewayEnd:       start.Add(-time.Hour),
		Cost:             &Cost{Nanos: 12600, Unpriced: false, Estimated: true},
	}
}

// policyRow carries the members of customers, tags, fallback and
// per-value overflow.
func policyRow() Row {
	r := minimalRow()
	r.Customer, r.Tags = "cus_42@acme", []string{"batch", "nightly"}
	r.Fallback = &Fallback{LimitID: "team_quarter", Model: "gpt-4o-mini"}
	r.Overflow = []string{"customer_daily"}
	return r
}

func minimalRow() Row {
	return Row{RequestID: "tt_e6gbpncee32dbu7y5jpsfr4ax4", Start: start, End: start, Status: 200, Decision: Admitted}
}

func TestRowGoldens(t *testing.T) {
	full, minimal := fullRow(), minimalRow()
	checkGolden(t, "row_full", append(full.AppendJSON(nil), '\n'))
	checkGolden(t, "row_minimal", append(minimal.AppendJSON(nil), '\n'))
}

// normalize is what a row looks like after a round trip: times in UTC
// without a monotonic reading, empty lists nil.
func normalize(r Row) Row {
	r.Start, r.End = r.Start.UTC().Round(0), r.End.UTC().Round(0)
	if len(r.Shadow) == 0 {
		r.Shadow = nil
	}
	if len(r.Breached) == 0 {
		r.Breached = nil
	}
	if len(r.Suspended) == 0 {
		r.Suspended = nil
	}
	return r
}

func TestRowRoundTrip(t *testing.T) {
	for _, r := range []Row{fullRow(), minimalRow(), policyRow()} {
		got, err := ParseRow(r.AppendJSON(nil))
		if err != nil {
			t.Fatal(err)
		}
		if want := normalize(r); !reflect.DeepEqual(got, want) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
		}
	}
}

// TestAgreesWithEncodingJSON: what AppendJSON writes, encoding/json reads
// back into the same row through the struct tags, and ParseRow reads what
// encoding/json writes.
func TestAgreesWithEncodingJSON(t *testing.T) {
	rows := []Row{fullRow(), minimalRow()}
	for _, r := range kindRows() {
		if r.Replaced != nil {
			r.Replaced.End = r.Replaced.End.UTC()
		}
		rows = append(rows, r)
	}
	rows = append(rows, policyRow())
	for _, r := range rows {
		var back Row
		if err := json.Unmarshal(r.AppendJSON(nil), &back); err != nil {
			t.Fatal(err)
		}
		if got, want := normalize(back), normalize(r); !reflect.DeepEqual(got, want) {
			t.Errorf("encoding/json reads\n %+v\nwant %+v", got, want)
		}
		std, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := ParseRow(std)
		if err != nil {
			t.Fatalf("ParseRow(encoding/json output): %v", err)
		}
		if want := normalize(r); !reflect.DeepEqual(parsed, want) {
			t.Errorf("ParseRow of encoding/json output:\n got %+v\nwant %+v", parsed, want)
		}
	}
}

func randString(r *rand.Rand) string {
	const alphabet = "abc:/_-\"\\\n\t\x01é日\u2028 "
	rs := []rune(alphabet)
	n := r.Intn(12)
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteRune(rs[r.Intn(len(rs))])
	}
	return b.String()
}

func randRefs(r *rand.Rand) []Ref {
	var out []Ref
	for i := r.Intn(3); i > 0; i-- {
		out = append(out, Ref{LimitID: randString(r), LimitType: randString(r), Node: randString(r)})
	}
	if out == nil && r.Intn(2) == 0 {
		out = []Ref{}
	}
	return out
}

func randTime(r *rand.Rand) time.Time {
	return time.Unix(r.Int63n(253402300799), r.Int63n(1e9)).In(time.FixedZone("Z", (r.Intn(48)-24)*1800))
}

type randRow struct{ Row }

func (randRow) Generate(r *rand.Rand, _ int) reflect.Value {
	var id [16]byte
	r.Read(id[:])
	row := Row{
		RequestID: wire.NewRequestID(id),
		Start:     randTime(r), End: randTime(r),
		KID: randString(r), Node: randString(r), Endpoint: randString(r), Provider: randString(r),
		Model: randString(r), Served: randString(r), Stream: r.Intn(2) == 0,
		Usage:     Usage{r.Int63(), r.Int63n(1000), r.Int63n(10), 0, r.Int63()},
		Status:    r.Intn(1000),
		Decision:  []Decision{Admitted, Refused, ShadowRefused, SoftBreach}[r.Intn(4)],
		ErrorType: randString(r),
		Shadow:    randRefs(r), Breached: randRefs(r),
		Estimated:        Estimated{r.Intn(2) == 0, r.Intn(2) == 0},
		Replica:          randString(r),
		ServedOutOfScope: r.Intn(2) == 0,
		UsageClamped:     r.Intn(2) == 0,
		Free:             r.Intn(2) == 0,
	}
	if r.Intn(2) == 0 {
		row.RefusedBy = &Ref{LimitID: randString(r), LimitType: randString(r), Node: randString(r)}
	}
	for i := r.Intn(3); i > 0; i-- {
		row.Suspended = append(row.Suspended, randString(r))
	}
	if r.Intn(2) == 0 {
		row.Cost = &Cost{Nanos: r.Int63(), Unpriced: r.Intn(2) == 0, Estimated: r.Intn(2) == 0}
	}
	if r.Intn(3) == 0 {
		row.Kind = []Kind{KindStart, KindSummary, KindClose}[r.Intn(3)]
		row.Count = r.Int63n(5) // 0: not written
		row.LeaseTTLMS = r.Int63n(3) * 1000
		for i := r.Intn(3); i > 0; i-- {
			row.Cut = append(row.Cut, randString(r))
		}
		if r.Intn(2) == 0 {
			row.Replaced = &Replaced{End: randTime(r).UTC().Round(0), Usage: Usage{Input: r.Int63n(9)}}
		}
	}
	if r.Intn(2) == 0 {
		row.Customer = randString(r)
		for i := r.Intn(3); i > 0; i-- {
			row.Tags = append(row.Tags, randString(r))
			row.Overflow = append(row.Overflow, randString(r))
		}
		if r.Intn(2) == 0 {
			row.Fallback = &Fallback{LimitID: randString(r), Model: randString(r)}
		}
	}
	return reflect.ValueOf(randRow{row})
}

func TestRoundTripProperty(t *testing.T) {
	f := func(rr randRow) bool {
		got, err := ParseRow(rr.AppendJSON(nil))
		if err != nil {
			t.Logf("%+v: %v", rr.Row, err)
			return false
		}
		if want := normalize(rr.Row); !reflect.DeepEqual(got, want) {
			t.Logf("round trip:\n got %+v\nwant %+v", got, want)
			return false
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 2000, Rand: rand.New(rand.NewSource(1))}); err != nil {
		t.Error("a row did not survive AppendJSON then ParseRow (logged above)")
	}
}

func TestAppendJSONDoesNotAllocate(t *testing.T) {
	r := fullRow()
	buf := make([]byte, 0, 2048)
	if n := testing.AllocsPerRun(100, func() { buf = r.AppendJSON(buf[:0]) }); n != 0 {
		t.Errorf("AppendJSON: %v allocations; want 0", n)
	}
}

// TestAppendTimeMatchesFormat holds the digit-by-digit timestamp to
// time.AppendFormat over the years it writes itself and the ones it
// leaves to AppendFormat, in several zones.
func TestAppendTimeMatchesFormat(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	zones := []*time.Location{time.UTC, time.FixedZone("x", -7*3600-1800), time.FixedZone("y", 14*3600)}
	for i := 0; i < 20000; i++ {
		sec := rng.Int63n(400*365*86400) - 100*365*86400 // 1870 to 2270
		if i%50 == 0 {
			sec = rng.Int63() >> rng.Intn(20) * (1 - 2*int64(rng.Intn(2))) // far years, both signs
		}
		ts := time.Unix(sec, rng.Int63n(1e9)).In(zones[i%len(zones)])
		want := `"` + ts.UTC().Format(TimeLayout) + `"`
		if got := string(appendTime(nil, ts)); got != want {
			t.Fatalf("%v: %s, want %s", ts, got, want)
		}
	}
}

func BenchmarkAppendTime(b *testing.B) {
	ts := time.Date(2026, 8, 9, 20, 44, 50, 123456789, time.UTC)
	buf := make([]byte, 0, 64)
	for b.Loop() {
		buf = appendTime(buf[:0], ts)
	}
}
