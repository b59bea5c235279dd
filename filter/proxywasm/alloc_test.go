package proxywasm

import (
	"errors"
	"strings"
	"testing"
	"unsafe"
)

func TestAllocate(t *testing.T) {
	if p := allocate(0); p == nil {
		t.Fatal("allocate(0) returned nil: the host would see a failure")
	}
	p := allocate(16)
	if p == nil {
		t.Fatal("allocate(16) returned nil")
	}
	b := unsafe.Slice(p, 16)
	for i := range b {
		b[i] = byte(i) // the block is writable
	}
	if allocate(maxAlloc+1) != nil {
		t.Error("an allocation past the memory cap must fail with nil, not trap")
	}
}

func TestAllocateSteering(t *testing.T) {
	dst := make([]byte, 8)
	allocSteer = dst
	if p := allocate(4); p != &dst[0] {
		t.Error("an allocation that fits must land in the steered buffer")
	}
	if allocSteer != nil {
		t.Error("steering must be used once")
	}
	allocSteer = dst
	if p := allocate(9); p == &dst[0] {
		t.Error("an allocation larger than the steered buffer must not use it")
	}
	allocSteer = nil
}

type stringer struct{}

func (stringer) String() string { return "from String" }

type badErr struct{}

func (*badErr) Error() string { panic("boom") }

func TestDescribe(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{"text", "text"},
		{errors.New("an error"), "an error"},
		{stringer{}, "from String"},
		{42, "42"},
		{int64(-7), "-7"},
		{uint32(7), "7"},
		{true, "true"},
		{struct{}{}, "a panic value of a type without Error or String"},
		{&badErr{}, "a panic value whose Error or String method panicked"},
	}
	for _, tt := range tests {
		if got := describe(tt.in); got != tt.want {
			t.Errorf("describe(%#v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestShortStack(t *testing.T) {
	st := "goroutine 1 [running]:\nproxywasm.recover()\n\tr.go:1\npanic({0x1})\n\truntime/panic.go:860\nmy.cause()\n\tmine.go:12\n"
	if got := shortStack([]byte(st)); got != "my.cause()\n\tmine.go:12\n" {
		t.Errorf("shortStack = %q", got)
	}
	long := strings.Repeat("x", 5000)
	if got := shortStack([]byte(long)); len(got) != 2048 {
		t.Errorf("shortStack kept %d bytes, want 2048", len(got))
	}
}

func TestStatusToError(t *testing.T) {
	for st := uint32(0); st < 14; st++ {
		err := statusToError(st)
		if (st == 0) != (err == nil) {
			t.Errorf("status %d: %v", st, err)
		}
	}
	if err := statusToError(99); err == nil || !strings.Contains(err.Error(), "unknown status 99") {
		t.Errorf("status 99: %v", err)
	}
}
