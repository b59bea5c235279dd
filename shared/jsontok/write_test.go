package jsontok

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestAppendStringReadsBack and FuzzAppendString: what AppendString
// writes is valid UTF-8 and reads back, through encoding/json, as the
// string with each byte of invalid UTF-8 made U+FFFD.
func TestAppendStringReadsBack(t *testing.T) {
	for _, s := range []string{"", "plain", `quote " and \ backslash`, "tab\tnew\nline\rcr", "\x00\x01\x1f\x7f",
		"é ü 日本", "\u2028\u2029", "bad \xff utf8 \xc3", "<&>"} {
		checkString(t, s)
	}
}

func checkString(t *testing.T, s string) {
	t.Helper()
	got := AppendString(nil, s)
	var back string
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("AppendString(%q) = %s: not JSON: %v", s, got, err)
	}
	var want strings.Builder // every invalid byte becomes U+FFFD, as in encoding/json
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		want.WriteRune(r)
		i += n
	}
	if back != want.String() {
		t.Fatalf("AppendString(%q) = %s reads back as %q", s, got, back)
	}
	if !utf8.Valid(got) {
		t.Fatalf("AppendString(%q) = %q: invalid UTF-8", s, got)
	}
}

// TestAppendStrings: a list of strings reads back as encoding/json reads
// it; an empty or nil list is [].
func TestAppendStrings(t *testing.T) {
	for _, ss := range [][]string{nil, {}, {""}, {"a"}, {"a", "b\"c", "<\u2028>"}} {
		got := AppendStrings([]byte("x"), ss)
		var back []string
		if err := json.Unmarshal(got[1:], &back); err != nil || got[0] != 'x' || len(back) != len(ss) {
			t.Fatalf("AppendStrings(%q) = %s: %v", ss, got, err)
		}
		for i := range ss {
			if back[i] != ss[i] {
				t.Errorf("AppendStrings(%q) = %s reads back as %q", ss, got, back)
			}
		}
	}
}

// TestAppendKey: the key goes as it is, the value as AppendString and
// AppendInt write it.
func TestAppendKey(t *testing.T) {
	got := AppendKeyString([]byte("{"), `"a":`, "x\"y")
	got = AppendKeyInt(got, `,"n":`, -12)
	got = AppendKeyInt(got, `,"m":`, 1234567)
	got = AppendKeyBool(got, `,"t":`, true)
	got = AppendKeyBool(got, `,"f":`, false)
	if want := `{"a":"x\"y","n":-12,"m":1234567,"t":true,"f":false`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("request refused by limit team_rpm")
	f.Add("\"\\\x00\u2028\xff")
	f.Fuzz(func(t *testing.T, s string) { checkString(t, s) })
}
