package ledger

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

const minimalJSON = `{"request_id":"tt_e6gbpncee32dbu7y5jpsfr4ax4","start":"2026-08-09T20:44:50Z","end":"2026-08-09T20:44:51Z","status":200,"decision":"admitted"}`

// with replaces or adds one member of minimalJSON.
func with(member string) string {
	return strings.TrimSuffix(minimalJSON, "}") + "," + member + "}"
}

func TestParseRowErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{``, `ledger: row: not valid JSON (at byte 0)`},
		{`{"request_id":`, `ledger: row: not valid JSON (at byte 14)`},
		{`{"request_id" "x"}`, `ledger: row: not valid JSON (at byte 14)`},
		{`{"status":tru}`, `ledger: row: not valid JSON (at byte 10)`},
		{`{"status":"x}`, `ledger: row: not valid JSON (at byte 13)`},
		{`{"kid":"a"} {}`, `ledger: row: not valid JSON (at byte 12)`},
		{`{"future":[1,}`, `ledger: row: not valid JSON (at byte 13)`},
		{`{"future":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`, `ledger: row: nested deeper than 512 levels (at byte 522)`},
		{`[1,2]`, `ledger: row: want a JSON object, got [1,2]`},
		{`"row"`, `ledger: row: want a JSON object, got "row"`},
		{`{}`, `ledger: row field "request_id": missing; every row carries it`},
		{`{"request_id":"tt_e6gbpncee32dbu7y5jpsfr4ax4","start":"2026-08-09T20:44:50Z","end":"2026-08-09T20:44:51Z","status":200}`,
			`ledger: row field "decision": missing; every row carries it`},
		{with(`"request_id":"tt_e6gbpncee32dbu7y5jpsfr4ax4"`), `ledger: row field "request_id": appears twice`},
		{`{"request_id":"r1"}`, `ledger: row field "request_id": "r1" is not a request id (tt_ and 26 lowercase base32 characters)`},
		{`{"request_id":7}`, `ledger: row field "request_id": want a string, got 7`},
		{`{"request_id":"tt_e6gbpncee32dbu7y5jpsfr4ax4","start":"yesterday"}`,
			`ledger: row field "start": want an RFC 3339 time such as 2026-08-09T20:44:50.000000000Z, got "yesterday"`},
		{`{"request_id":"tt_e6gbpncee32dbu7y5jpsfr4ax4","start":"0000-01-01T00:00:00+01:00"}`,
			`ledger: row field "start": "0000-01-01T00:00:00+01:00" falls outside the years 0000 to 9999 in UTC`},
		{`{"request_id":"tt_e6gbpncee32dbu7y5jpsfr4ax4","end":null}`,
			`ledger: row field "end": want a string, got null`},
		{with(`"status":"200"`), `ledger: row field "status": appears twice`},
		{`{"status":"200"}`, `ledger: row field "status": want an integer, got "200"`},
		{`{"status":200.5}`, `ledger: row field "status": want an integer, got 200.5`},
		{`{"status":2e2}`, `ledger: row field "status": want an integer, got 2e2`},
		{`{"status":1000}`, `ledger: row field "status": 1000 is not an HTTP status (0 when no response was sent)`},
		{`{"status":-1}`, `ledger: row field "status": negative -1; counts are never below 0`},
		{`{"status":99999999999999999999}`, `ledger: row field "status": 99999999999999999999 is out of range`},
		{`{"decision":"maybe"}`, `ledger: row field "decision": "maybe" is not one of admitted, refused, shadow_refused, soft_breach, passthrough`},
		{`{"stream":"yes"}`, `ledger: row field "stream": want true or false, got "yes"`},
		{`{"usage":[]}`, `ledger: row field "usage": want an object, got []`},
		{`{"usage":{"input":-3}}`, `ledger: row field "usage.input": negative -3; counts are never below 0`},
		{`{"usage":{"total":1,"total":2}}`, `ledger: row field "usage.total": appears twice`},
		{`{"refused_by":"team_rpm"}`, `ledger: row field "refused_by": want an object, got "team_rpm"`},
		{`{"refused_by":{"limit_id":"team_rpm","node":"org:acme"}}`, `ledger: row field "refused_by.limit_type": missing; every row carries it`},
		{`{"shadow":{}}`, `ledger: row field "shadow": want a list, got {}`},
		{`{"breached":[{"limit_id":"a","limit_type":"rpm","node":"n"},{"limit_id":5}]}`, `ledger: row field "breached[1].limit_id": want a string, got 5`},
		{`{"suspended":["a",null]}`, `ledger: row field "suspended[1]": want a string, got null`},
		{`{"estimated":{"output":1}}`, `ledger: row field "estimated.output": want true or false, got 1`},
		{`{"cost":{"nanos":1.5}}`, `ledger: row field "cost.nanos": want an integer, got 1.5`},
		{`{"kid":"` + "\xff" + `"}`, `ledger: row: not valid JSON (at byte 8)`},
		{`{"model":"a very long model name that goes on and on and on and on"` + `,"kid":1}`, `ledger: row field "kid": want a string, got 1`},
		{`{"kid":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","node":["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]}`,
			`ledger: row field "node": want a string, got ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…`},
	} {
		_, err := ParseRow([]byte(c.in))
		if err == nil || err.Error() != c.want {
			t.Errorf("ParseRow(%s):\n got %v\nwant %s", c.in, err, c.want)
		}
		var fe *FieldError
		if err != nil && !errors.As(err, &fe) {
			t.Errorf("ParseRow(%s): %T is not a *FieldError", c.in, err)
		}
	}
}

func TestParseRowToleratesUnknownMembers(t *testing.T) {
	in := `{"request_id":"tt_e6gbpncee32dbu7y5jpsfr4ax4","future":{"x":[1,2]},"start":"2026-08-09T22:44:50.5+02:00","end":"2026-08-09T20:44:51Z",` +
		`"usage":{"input":3,"audio":9},"status":0,"decision":"soft_breach","refused_by":null,"shadow":null,"cost":{"nanos":0,"currency":"usd"},"future":1}`
	r, err := ParseRow([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if r.Usage.Input != 3 || r.Decision != SoftBreach || r.Cost == nil || r.Status != 0 {
		t.Errorf("parsed %+v", r)
	}
	if want := time.Date(2026, 8, 9, 20, 44, 50, 500000000, time.UTC); r.Start != want {
		t.Errorf("start %v; want %v in UTC", r.Start, want)
	}
}

func TestJSONL(t *testing.T) {
	rows := []Row{fullRow(), minimalRow(), minimalRow()}
	rows[2].RequestID = "tt_tbuhetygwddxiaprkw3j3fkwze"
	batch := AppendJSONL(nil, rows)
	if n := strings.Count(string(batch), "\n"); n != 3 {
		t.Fatalf("%d lines", n)
	}
	withBlanks := append([]byte("\n  \n"), batch...)
	withBlanks = withBlanks[:len(withBlanks)-1] // no final newline
	got, err := ParseJSONL(withBlanks, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{normalize(rows[0]), normalize(rows[1]), normalize(rows[2])}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseJSONL:\n got %+v\nwant %+v", got, want)
	}

	bad := append(AppendJSONL(nil, rows[:1]), []byte("\n"+`{"status":"x"}`+"\n")...)
	got, err = ParseJSONL(bad, nil)
	if err == nil || err.Error() != `ledger: line 3: field "status": want an integer, got "x"` || len(got) != 1 {
		t.Errorf("ParseJSONL(bad) = %d rows, %v", len(got), err)
	}
	var le *LineError
	if !errors.As(err, &le) || le.Line != 3 {
		t.Errorf("want a *LineError at line 3: %#v", err)
	}
	if _, err := ParseJSONL([]byte("{\n"), nil); err == nil || err.Error() != "ledger: line 1: not valid JSON (at byte 1)" {
		t.Errorf("ParseJSONL({) = %v", err)
	}
}

func TestDecoder(t *testing.T) {
	rows := []Row{fullRow(), minimalRow()}
	in := string(AppendJSONL(nil, rows[:1])) + "not json\n\n" + string(AppendJSONL(nil, rows[1:])) + `{"request_id":"tt_e6gbpn` // cut short
	d := NewDecoder(strings.NewReader(in))
	r, err := d.Next()
	if err != nil || !reflect.DeepEqual(r, normalize(rows[0])) {
		t.Fatalf("row 1: %v", err)
	}
	if _, err := d.Next(); err == nil || err.Error() != "ledger: line 2: not valid JSON (at byte 0)" {
		t.Fatalf("line 2: %v", err)
	}
	r, err = d.Next()
	if err != nil || !reflect.DeepEqual(r, normalize(rows[1])) || d.Line() != 4 {
		t.Fatalf("row at line 4: %v (line %d)", err, d.Line())
	}
	if _, err := d.Next(); err == nil || err.Error() != "ledger: line 5: not valid JSON (at byte 24)" {
		t.Fatalf("line 5: %v", err)
	}
	if _, err := d.Next(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	long := NewDecoder(strings.NewReader(strings.Repeat(" ", MaxLineBytes+1) + "\n"))
	if _, err := long.Next(); err == nil || !strings.HasPrefix(err.Error(), "ledger: line 1: ") {
		t.Fatalf("long line: %v", err)
	}
}

func FuzzParseRow(f *testing.F) {
	full, minimal := fullRow(), minimalRow()
	f.Add(full.AppendJSON(nil))
	f.Add(minimal.AppendJSON(nil))
	f.Add([]byte(minimalJSON))
	f.Add([]byte(`{"shadow":[{"limit_id":"a"}],"usage":{"input":1e3}}`))
	f.Add([]byte(strings.Replace(minimalJSON, "2026-08-09T20:44:50Z", "9999-12-31T23:59:59-01:00", 1)))
	f.Add([]byte(`{"request_id":"tt_e6gbpncee32dbu7y5jpsfr4ax4","start":"2026-08-09T20:44:50Z","end":"2026-08-09T20:44:51Z","status":200,"decision":"admitted","kid":"\ud83d\ude00\ud800x\u00e9\/","x":[{"y":-0.5e+3}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRow(data)
		valid := json.Valid(data) && utf8.Valid(data) // encoding/json lets invalid UTF-8 through; RFC 8259 does not
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("%T is not a *FieldError", err)
			}
			if strings.HasPrefix(fe.Reason, "not valid JSON") && valid {
				t.Fatalf("ParseRow calls valid JSON invalid: %v", err)
			}
			return
		}
		if !valid {
			t.Fatalf("ParseRow accepted invalid JSON %q", data)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		for name, got := range map[string]string{"request_id": r.RequestID, "kid": r.KID, "node": r.Node, "model": r.Model, "replica": r.Replica} {
			if want, ok := m[name].(string); ok && want != got {
				t.Fatalf("%s: ParseRow read %q, encoding/json %q", name, got, want)
			}
		}
		out := r.AppendJSON(nil)
		again, err := ParseRow(out)
		if err != nil {
			t.Fatalf("a parsed row writes %s, which does not parse: %v", out, err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip changed the row:\n%+v\n%+v", r, again)
		}
	})
}

func BenchmarkAppendJSON(b *testing.B) {
	r := fullRow()
	buf := make([]byte, 0, 2048)
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendJSON(buf[:0])
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkParseRow(b *testing.B) {
	r := fullRow()
	data := r.AppendJSON(nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseRow(data); err != nil {
			b.Fatal(err)
		}
	}
}
