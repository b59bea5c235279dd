package govern_test

import (
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/govern"
)

func TestValidNodeID(t *testing.T) {
	tests := []struct{ id, err string }{
		{id: "org:acme"},
		{id: "org:acme/team:ml/user:dev1"},
		{id: "org:a-b_9/team:x"},
		{id: "project:x"},
		{id: "", err: `node id is empty (write <kind>:<id> segments joined by /, e.g. org:acme/team:ml)`},
		{id: "__global", err: `node id "__global" is the synthetic root, not a node (it cannot be declared, created or own a key)`},
		{id: "org:Acme", err: `node id "org:Acme": segment "org:Acme": id "Acme" is out of charset (lowercase letters, digits, - and _)`},
		{id: "Org:acme", err: `node id "Org:acme": segment "Org:acme": kind "Org" is out of charset (lowercase letters)`},
		{id: "org:acme/../org:evil", err: `node id "org:acme/../org:evil": segment ".." is not allowed`},
		{id: "org:acme//team:x", err: `node id "org:acme//team:x": empty segment (segments are <kind>:<id> joined by a single /)`},
		{id: "org:acme/", err: `node id "org:acme/": empty segment (segments are <kind>:<id> joined by a single /)`},
		{id: "acme", err: `node id "acme": segment "acme" is not <kind>:<id>`},
		{id: ":acme", err: `node id ":acme": segment ":acme" has an empty kind`},
		{id: "org:", err: `node id "org:": segment "org:": id is empty`},
		{id: "org:a b", err: `node id "org:a b": segment "org:a b": id "a b" is out of charset (lowercase letters, digits, - and _)`},
		{id: "org:a.b", err: `node id "org:a.b": segment "org:a.b": id "a.b" is out of charset (lowercase letters, digits, - and _)`},
		{id: "org:a:b", err: `node id "org:a:b": segment "org:a:b": id "a:b" is out of charset (lowercase letters, digits, - and _)`},
		{id: "org:" + strings.Repeat("a", govern.MaxNodeIDBytes-4)},
		{id: "org:" + strings.Repeat("a", govern.MaxNodeIDBytes-3), err: `node id "org:aaaaaaaaaaaaaaaaaaaaaaaaaaaa"… is 513 bytes long; a node id has at most 512 (it is part of every counter, ledger row and key of the node)`},
		{id: "org:acme/key:vk_FEKZdMs2UQRi", err: `node id "org:acme/key:vk_FEKZdMs2UQRi": segment "key:vk_FEKZdMs2UQRi": id "vk_FEKZdMs2UQRi" is out of charset (lowercase letters, digits, - and _)`},
	}
	for _, tc := range tests {
		err := govern.ValidNodeID(tc.id)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("ValidNodeID(%q) = %v", tc.id, err)
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("ValidNodeID(%q) = %v, want %q", tc.id, err, tc.err)
		}
	}
}

func TestNodeLevelDepth(t *testing.T) {
	tests := []struct {
		node, level string
		depth       int
	}{
		{govern.Global, "global", 0},
		{"org:acme", "org", 1},
		{"org:acme/team:ml", "team", 2},
		{dev1, "user", 3},
		{dev1 + "/key:" + kid, "key", 4},
	}
	for _, tc := range tests {
		if l, d := govern.NodeLevel(tc.node), govern.NodeDepth(tc.node); l != tc.level || d != tc.depth {
			t.Errorf("%s: level %q depth %d, want %q %d", tc.node, l, d, tc.level, tc.depth)
		}
	}
}

func TestChain(t *testing.T) {
	tests := []struct{ owner, kid, want string }{
		{dev1, kid, "org:acme/team:ml/user:dev1/key:vk_FEKZdMs2UQRi org:acme/team:ml/user:dev1 org:acme/team:ml org:acme __global"},
		{"org:acme", kid, "org:acme/key:vk_FEKZdMs2UQRi org:acme __global"},
		{"org:acme/team:ml", "", "org:acme/team:ml org:acme __global"},
		{"", "", "__global"},
		{"", kid, "__global"},
		{govern.Global, kid, "__global"},
	}
	for _, tc := range tests {
		if got := strings.Join(govern.Chain(tc.owner, tc.kid), " "); got != tc.want {
			t.Errorf("Chain(%q, %q) = %s, want %s", tc.owner, tc.kid, got, tc.want)
		}
	}
	buf := make([]string, 0, 8)
	if n := testing.AllocsPerRun(100, func() { buf = govern.AppendChain(buf[:0], dev1, "") }); n != 0 {
		t.Errorf("AppendChain without a key leaf allocates %v times", n)
	}
	buf = govern.AppendChain([]string{"x"}, "org:acme", "")
	if strings.Join(buf, " ") != "x org:acme __global" {
		t.Errorf("AppendChain does not append: %v", buf)
	}
}
