package filter

import (
	"testing"

	"github.com/tokentriage/tokentriage/shared/govern"
)

// TestResolvedKeysAreBounded: at most resolvedKeys keys keep their
// resolved instances; the key that began keeping them longest ago gives
// them up for the next, and a key already keeping them takes no new
// place.
func TestResolvedKeysAreBounded(t *testing.T) {
	e := &Engine{}
	keys := make([]*keyEntry, resolvedKeys+1)
	for i := range keys {
		keys[i] = &keyEntry{}
		e.keepResolved(keys[i])
		e.keepResolved(keys[i]) // already keeping: no second place
		keys[i].resolved[0].inst = []govern.Instance{{ID: "x"}}
	}
	if keys[0].keeps || keys[0].resolved[0].inst != nil {
		t.Errorf("the first of %d keys still keeps its instances", len(keys))
	}
	for i, k := range keys[1:] {
		if !k.keeps || k.resolved[0].inst == nil {
			t.Fatalf("key %d of %d gave up its instances", i+1, len(keys))
		}
	}
}
