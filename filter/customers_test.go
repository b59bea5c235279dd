package filter_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// TestCustomerAndTagsHeaders: X-Tt-Customer and X-Tt-Tags name a
// request's customer and tags; they never reach the upstream, they ride
// the row, and a per-customer rpm keeps one window per customer.
func TestCustomerAndTagsHeaders(t *testing.T) {
	lims := `{"id":"customer_rpm","attach":{"level":"user"},"type":"rpm","amount":2,"period":"1m","match":{"customer":"*"}},
		{"id":"batch_rpm","attach":{"level":"user"},"type":"rpm","amount":3,"period":"1m","match":{"tag":"batch"}}`
	r := accountantRig(t, lims)
	for i := 0; i < 2; i++ {
		mustStatus(t, r.chat(dev1Key, chatGermany, "X-Tt-Customer", "cus_1", "X-Tt-Tags", "nightly, batch"), 200)
	}
	resp := r.chat(dev1Key, chatGermany, "X-Tt-Customer", "cus_1")
	mustStatus(t, resp, 429)
	if got := resp.Headers.Get("X-Tt-Refused-By"); got != "customer_rpm" {
		t.Errorf("refused by %q", got)
	}
	mustStatus(t, r.chat(dev1Key, chatGermany, "X-Tt-Customer", "cus_2", "X-Tt-Tags", "batch"), 200)
	// The tag's window holds three: the fourth batch call is refused.
	resp = r.chat(dev1Key, chatGermany, "X-Tt-Customer", "cus_3", "X-Tt-Tags", "batch")
	mustStatus(t, resp, 429)
	if got := resp.Headers.Get("X-Tt-Refused-By"); got != "batch_rpm" {
		t.Errorf("refused by %q: %s", got, resp.Body)
	}
	for _, q := range r.stub.Requests() {
		for name := range q.Header {
			if strings.EqualFold(name, "X-Tt-Customer") || strings.EqualFold(name, "X-Tt-Tags") {
				t.Errorf("the upstream saw %s: %v", name, q.Header[name])
			}
		}
	}
	r.step(time.Second)
	var tagged int
	for _, row := range r.acct.ledger() {
		if row.Customer == "" {
			t.Errorf("row without its customer: %+v", row)
		}
		if len(row.Tags) == 2 {
			tagged++
			if row.Tags[0] != "batch" || row.Tags[1] != "nightly" {
				t.Errorf("row tags %q, want sorted", row.Tags)
			}
		}
	}
	if tagged != 2 {
		t.Errorf("%d rows with both tags, want 2", tagged)
	}
	// /tt/v1/me with the header shows that customer's counter.
	var doc struct {
		Limits []map[string]any `json:"limits"`
	}
	me := r.do(req{method: "GET", path: "/tt/v1/me", key: dev1Key, headers: map[string]string{"X-Tt-Customer": "cus_1"}})
	if err := json.Unmarshal(me.Body, &doc); err != nil {
		t.Fatal(err)
	}
	for _, l := range doc.Limits {
		if l["limit_id"] == "customer_rpm" && (l["customer"] != "cus_1" || l["observed"] != float64(2)) {
			t.Errorf("customer_rpm row %v", l)
		}
	}
}

// TestCustomerFromBody: without the header, the customer comes from the
// body (OpenAI's user, Anthropic's metadata.user_id); a budget per
// customer reads that customer's counter in the snapshot.
func TestCustomerFromBody(t *testing.T) {
	lims := `{"id":"customer_daily","attach":{"level":"user"},"type":"budget_usd","amount_usd":5,"period":"day","match":{"customer":"*"}}`
	r := accountantRig(t, lims)
	id := func(c string) string {
		return "customer_daily|budget_usd|org:acme/team:ml/user:dev1|customer=" + c + "|day|"
	}
	r.acct.setSnapshot("s1", syncwire.Entry{ID: id("spent"), PeriodStart: dayStart(), Value: 5_000_000_000})
	r.sync()
	resp := r.chat(dev1Key, chatBody("gpt-4o-mini", germany, `,"user":"spent"`))
	mustStatus(t, resp, 429)
	if !strings.Contains(string(resp.Body), `"limit_id":"customer_daily"`) {
		t.Errorf("body %s", resp.Body)
	}
	mustStatus(t, r.chat(dev1Key, chatBody("gpt-4o-mini", germany, `,"user":"fresh"`)), 200)
	// Anthropic's metadata.user_id.
	resp = r.do(req{path: "/v1/messages", key: dev1Key, body: messagesBody("claude-3-5-haiku-latest", germany, `,"metadata":{"user_id":"spent"}`)})
	mustStatus(t, resp, 429)
	// The header wins over the body.
	mustStatus(t, r.chat(dev1Key, chatBody("gpt-4o-mini", germany, `,"user":"spent"`), "X-Tt-Customer", "fresh"), 200)
	// The body reaches the upstream as sent: user stays in it.
	if last := r.stub.Requests(); !strings.Contains(string(last[len(last)-1].Body), `"user":"spent"`) {
		t.Errorf("the body lost its user member: %s", last[len(last)-1].Body)
	}
}

// TestIdentifierBounds: a model, customer or tag out of its bound is a 400
// naming the bound, from a header or the body; a 10 MB model name too.
func TestIdentifierBounds(t *testing.T) {
	lims := `{"id":"per_model","attach":{"level":"user"},"type":"budget_usd","amount_usd":5,"period":"day","match":{"model":"*"}}`
	r := newRig(t, rigOptions{governance: gov(lims, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true,
		bufferLimit: 9 << 20})
	for _, c := range []struct {
		name    string
		body    string
		headers []string
		want    string
	}{
		{"model of 8 MB", chatBody(strings.Repeat("m", 8<<20-100), germany), nil,
			`the body's model member: model \"mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm...\" is 8388508 bytes, over the 256-byte bound of a model`},
		{"model charset", chatBody("gpt 4o", germany), nil, `model \"gpt 4o\" holds ' ' at byte 3, outside the charset of a model`},
		{"customer header charset", chatGermany, []string{"X-Tt-Customer", "John Doe"},
			`the x-tt-customer header: customer \"John Doe\" holds ' ' at byte 4, outside the charset of a customer (letters, digits and . _ - : / @ + =)`},
		{"customer header length", chatGermany, []string{"X-Tt-Customer", strings.Repeat("c", 300)}, `is 300 bytes, over the 256-byte bound of a customer`},
		{"customer body", chatBody("gpt-4o-mini", germany, `,"user":"a*b"`), nil, `the body's user member: customer \"a*b\" holds '*' at byte 1`},
		{"customer body type", chatBody("gpt-4o-mini", germany, `,"user":42`), nil, `the customer must be a string; got a number`},
		{"tag charset", chatGermany, []string{"X-Tt-Tags", "batch,night job"}, `tag \"night job\" holds ' ' at byte 5, outside the charset of a tag`},
		{"tags count", chatGermany, []string{"X-Tt-Tags", strings.Repeat("t,", 16) + "u"}, `17 tags, over the bound of 16 tags on one request`},
	} {
		resp := r.chat(dev1Key, c.body, c.headers...)
		if resp.Status != 400 || !strings.Contains(string(resp.Body), c.want) {
			t.Errorf("%s: %d %.300s\nwant 400 with %s", c.name, resp.Status, resp.Body, c.want)
		}
	}
	// Nothing of those reached the upstream, and every row later is
	// recorded.
	if n := len(r.stub.Requests()); n != 0 {
		t.Errorf("%d requests reached the upstream", n)
	}
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	r.step(time.Second)
	rows := r.acct.ledger()
	served := 0
	for _, row := range rows {
		if len(row.Model) > 256 || len(row.Customer) > 256 {
			t.Errorf("a row carries a model of %d bytes, a customer of %d", len(row.Model), len(row.Customer))
		}
		if row.Status == 200 {
			served++
		}
	}
	if len(rows) != 9 || served != 1 {
		t.Errorf("%d rows, %d served; want 9 and 1", len(rows), served)
	}
}

// TestCustomerScope: a key restricted to customers serves those only, and
// no request that names none.
func TestCustomerScope(t *testing.T) {
	k := dev1Key.withScopes(`{"customers":["acme-*"],"allow_passthrough":true}`)
	r := newRig(t, rigOptions{governance: gov(`{"id":"r","attach":{"level":"user"},"type":"rpm","amount":100,"period":"1m"}`, `,"require_key":true`), keys: []testKey{k}})
	mustStatus(t, r.chat(k, chatGermany, "X-Tt-Customer", "acme-7"), 200)
	mustStatus(t, r.chat(k, chatBody("gpt-4o-mini", germany, `,"user":"acme-8"`)), 200)
	for _, c := range []struct {
		body, customer, want string
	}{
		{chatGermany, "globex", `may not serve customer \"globex\": outside the key's customers scope [\"acme-*\"]`},
		{chatGermany, "", `serves only the customers of its customers scope [\"acme-*\"], and the request names none`},
	} {
		var hs []string
		if c.customer != "" {
			hs = []string{"X-Tt-Customer", c.customer}
		}
		resp := r.chat(k, c.body, hs...)
		if resp.Status != 403 || !strings.Contains(string(resp.Body), c.want) {
			t.Errorf("customer %q: %d %s", c.customer, resp.Status, resp.Body)
		}
	}
	// A passthrough call is checked on its header.
	mustStatus(t, r.do(req{method: "GET", path: "/v1/files", key: k, headers: map[string]string{"X-Tt-Customer": "globex"}}), 403)
	me := r.me(k)
	if !strings.Contains(string(me.Body), `"customers":["acme-*"]`) {
		t.Errorf("/tt/v1/me scopes: %s", me.Body)
	}
}

// TestMaxDistinctSlots: a per-model rpm keeps windows for at most
// max_distinct models at once; the next models share the overflow window
// (disclosed on the row and in /tt/v1/me) until a model's window drains
// and its slot goes to the next one.
func TestMaxDistinctSlots(t *testing.T) {
	lims := `{"id":"model_rpm","attach":{"level":"user"},"type":"rpm","amount":1,"period":"1m","match":{"model":"*"},"max_distinct":3}`
	r := accountantRig(t, lims)
	for i := 1; i <= 3; i++ {
		mustStatus(t, r.chat(dev1Key, chatBody("m"+strconvI(i), germany)), 200)
	}
	// Three models hold the three slots: m4 is counted in the overflow
	// window, and m5 shares it (one a minute for both).
	mustStatus(t, r.chat(dev1Key, chatBody("m4", germany)), 200)
	resp := r.chat(dev1Key, chatBody("m5", germany))
	mustStatus(t, resp, 429)
	// m1 still has its own window: refused by it, not by the overflow's.
	mustStatus(t, r.chat(dev1Key, chatBody("m1", germany)), 429)
	me := r.do(req{method: "GET", path: "/tt/v1/me?model=m5", key: dev1Key})
	if !strings.Contains(string(me.Body), `"overflow":true`) || !strings.Contains(string(me.Body), `"max_distinct":3`) {
		t.Errorf("/tt/v1/me for an overflowed model: %s", me.Body)
	}
	r.step(time.Second)
	over := 0
	for _, row := range r.acct.ledger() {
		if len(row.Overflow) == 1 && row.Overflow[0] == "model_rpm" {
			over++
		}
	}
	if over != 2 {
		t.Errorf("%d rows say overflow, want 2 (m4 and m5)", over)
	}
	if got := r.metric("tokentriage.overflow"); got != 2 {
		t.Errorf("tokentriage.overflow = %d", got)
	}
	// The windows drain; m5 takes a slot of its own, m6 another.
	r.step(2 * time.Minute)
	mustStatus(t, r.chat(dev1Key, chatBody("m5", germany)), 200)
	mustStatus(t, r.chat(dev1Key, chatBody("m6", germany)), 200)
	mustStatus(t, r.chat(dev1Key, chatBody("m5", germany)), 429)
	me = r.do(req{method: "GET", path: "/tt/v1/me?model=m6", key: dev1Key})
	if strings.Contains(string(me.Body), `"overflow":true`) {
		t.Errorf("/tt/v1/me for m6 with a slot: %s", me.Body)
	}
	// However many models a caller names, the host keeps at most
	// max_distinct + 1 cells of the limit (and their owners).
	for i := 0; i < 200; i++ {
		r.chat(dev1Key, chatBody("flood-"+strconvI(i), germany))
	}
	n := 0
	for _, k := range r.h.SharedDataKeys() {
		if strings.Contains(k, "model_rpm|rpm|") {
			n++
		}
	}
	if n > 2*3+1 {
		t.Errorf("%d shared-data keys of model_rpm, want at most 7 (3 slots, their owners, the overflow)", n)
	}
}

// TestMaxDistinctSettled: a per-customer budget whose instance is full
// (the accountant says so) judges a customer without a counter by the
// overflow counter; one with a counter by its own.
func TestMaxDistinctSettled(t *testing.T) {
	lims := `{"id":"customer_daily","attach":{"level":"user"},"type":"budget_usd","amount_usd":5,"period":"day","match":{"customer":"*"},"max_distinct":2}`
	r := accountantRig(t, lims)
	base := "customer_daily|budget_usd|org:acme/team:ml/user:dev1|customer="
	r.acct.setSnapshot("s1",
		syncwire.Entry{ID: base + "#distinct", PeriodStart: dayStart(), Value: 2},
		syncwire.Entry{ID: base + "a|day|", PeriodStart: dayStart(), Value: 1_000},
		syncwire.Entry{ID: base + "b|day|", PeriodStart: dayStart(), Value: 1_000},
		syncwire.Entry{ID: base + "*|day|", PeriodStart: dayStart(), Value: 5_000_000_000})
	r.sync()
	mustStatus(t, r.chat(dev1Key, chatGermany, "X-Tt-Customer", "a"), 200)
	resp := r.chat(dev1Key, chatGermany, "X-Tt-Customer", "newcomer")
	mustStatus(t, resp, 429)
	me := r.do(req{method: "GET", path: "/tt/v1/me", key: dev1Key, headers: map[string]string{"X-Tt-Customer": "newcomer"}})
	for _, want := range []string{`"customer":"newcomer"`, `"overflow":true`, `"distinct":2,"max_distinct":2`} {
		if !strings.Contains(string(me.Body), want) {
			t.Errorf("/tt/v1/me lacks %s: %s", want, me.Body)
		}
	}
	r.step(time.Second)
	for _, row := range r.acct.ledger() {
		if row.Customer == "newcomer" && (len(row.Overflow) != 1 || row.Overflow[0] != "customer_daily") {
			t.Errorf("the newcomer's row: overflow %v", row.Overflow)
		}
	}
}

func strconvI(i int) string { return strconv.Itoa(i) }
