package rate

import (
	"testing"
	"time"
)

func TestStateEncoding(t *testing.T) {
	p := Params{Amount: 7, Period: time.Minute, Burst: 9}
	for _, a := range algorithms {
		_, s := Take(a, State{}, t0, 3, p)
		b := s.AppendBinary(nil)
		if b[0] != 0x10|byte(a) {
			t.Errorf("%s: tag byte %#x", a, b[0])
		}
		back, err := DecodeState(b)
		if err != nil || back != s {
			t.Errorf("%s: %x decodes to %+v, %v; want %+v", a, b, back, err, s)
		}
		if back.Algorithm() != a {
			t.Errorf("%s: decoded state belongs to %s", a, back.Algorithm())
		}
	}
	for _, b := range [][]byte{nil, {}, {0}} {
		if s, err := DecodeState(b); err != nil || !s.IsZero() {
			t.Errorf("%x: %+v, %v; want a fresh cell", b, s, err)
		}
	}
	if got := (State{}).AppendBinary(nil); string(got) != "\x00" {
		t.Errorf("fresh cell encodes to %x; want 00", got)
	}
}

func TestDecodeStateErrors(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want string
	}{
		{[]byte{0x21, 0, 0}, "rate: decoding state: tag byte 0x21: unknown format version"},
		{[]byte{0x15}, "rate: decoding state: tag byte 0x15: unknown algorithm"},
		{[]byte{0x10}, "rate: decoding state: tag byte 0x10: unknown algorithm"},
		{[]byte{0x11, 1, 2, 3}, "rate: decoding gcra state: 4 bytes: want 17"},
		{[]byte{0x13, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "rate: decoding sliding_window state: 11 bytes: want 13"},
		{append([]byte{0x11}, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0), "rate: decoding gcra state: negative remainder -9223372036854775808"},
		{append(make([]byte, 0, 25), 0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), "rate: decoding token_bucket state: negative carry -1"},
	} {
		_, err := DecodeState(c.in)
		if err == nil || err.Error() != c.want {
			t.Errorf("%x: error %v; want %q", c.in, err, c.want)
		}
	}
}

func TestParseAlgorithm(t *testing.T) {
	for _, a := range algorithms {
		got, ok := ParseAlgorithm(a.String())
		if !ok || got != a {
			t.Errorf("ParseAlgorithm(%q) = %v, %v", a.String(), got, ok)
		}
	}
	for _, s := range []string{"", "GCRA", "leaky_bucket", "unknown"} {
		if _, ok := ParseAlgorithm(s); ok {
			t.Errorf("ParseAlgorithm(%q) accepted", s)
		}
	}
	if s := Algorithm(0).String(); s != "unknown" {
		t.Errorf("Algorithm(0).String() = %q", s)
	}
}
