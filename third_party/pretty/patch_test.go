package pretty

import "testing"

// The tokentriage patch: string unescaping without encoding/json.
func TestParsestrUnescapes(t *testing.T) {
	for in, want := range map[string]string{
		`"plain"`:              "plain",
		`"a\"b"`:               `a"b`,
		`"a\/b\\c\n"`:          "a/b\\c\n",
		`"\u00e9\ud83d\ude00"`: "é😀",
	} {
		if got := string(parsestr([]byte(in))); got != want {
			t.Errorf("parsestr(%s) = %q, want %q", in, got, want)
		}
	}
	if got := string(PrettyOptions([]byte(`{"b\/":1,"a\"":2}`), &Options{SortKeys: true, Indent: "", Width: 80})); got == "" {
		t.Fatal("sorted pretty printing returned nothing")
	}
}
