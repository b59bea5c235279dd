package wasmtest

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// sharedStore is the shared data of one vm_id (shared/proxy-wasm.md 3.4):
// every VM of the host reads and writes it. CAS values come from one counter
// starting at 1 (0 is skipped on wrap); a set of an existing key with a
// non-zero CAS that is not the current one fails with CAS_MISMATCH, a set of
// a missing key always succeeds. The store is sharded so that VMs working on
// different keys do not contend; stored values are never mutated, so a
// reader copies one out after letting go of the lock.
type sharedStore struct {
	seed   maphash.Seed
	cas    atomic.Uint32
	shards [64]sharedShard
}

type sharedShard struct {
	mu sync.RWMutex
	m  map[string]sharedValue
}

type sharedValue struct {
	data []byte
	cas  uint32
}

func newSharedStore() *sharedStore {
	s := &sharedStore{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = map[string]sharedValue{}
	}
	return s
}

func (s *sharedStore) shard(key []byte) *sharedShard {
	return &s.shards[maphash.Bytes(s.seed, key)%uint64(len(s.shards))]
}

func (s *sharedStore) nextCAS() uint32 {
	for {
		c := s.cas.Add(1)
		if c != 0 {
			return c
		}
	}
}

func (s *sharedStore) get(key []byte) (sharedValue, bool) {
	sh := s.shard(key)
	sh.mu.RLock()
	v, ok := sh.m[string(key)]
	sh.mu.RUnlock()
	return v, ok
}

func (s *sharedStore) set(key, value []byte, cas uint32) status {
	sh := s.shard(key)
	data := append([]byte(nil), value...)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if cur, ok := sh.m[string(key)]; ok && cas != 0 && cas != cur.cas {
		return statusCASMismatch
	}
	sh.m[string(key)] = sharedValue{data: data, cas: s.nextCAS()}
	return statusOK
}

// proxy_get_shared_data(key_ptr, key_size, ret_value_ptr, ret_value_size, ret_cas)
func hostGetSharedData(v *vm, s []uint64) {
	kp, kn, pp, sp, cp := uint32(s[0]), uint32(s[1]), uint32(s[2]), uint32(s[3]), uint32(s[4])
	v.total.SharedGets++
	v.counts.SharedGets++
	key, ok := v.read(kp, kn)
	if !ok {
		s[0] = statusInvalidMemoryAccess
		return
	}
	val, found := v.h.shared.get(key)
	if !found {
		s[0] = statusNotFound
		return
	}
	if st := v.outBytes(val.data, pp, sp); st != statusOK {
		s[0] = uint64(st)
		return
	}
	if !v.putU32(cp, val.cas) {
		s[0] = statusInvalidMemoryAccess
		return
	}
	s[0] = statusOK
}

// proxy_set_shared_data(key_ptr, key_size, value_ptr, value_size, cas)
func hostSetSharedData(v *vm, s []uint64) {
	kp, kn, vp, vn, cas := uint32(s[0]), uint32(s[1]), uint32(s[2]), uint32(s[3]), uint32(s[4])
	v.total.SharedSets++
	v.counts.SharedSets++
	key, ok1 := v.read(kp, kn)
	val, ok2 := v.read(vp, vn)
	if !ok1 || !ok2 {
		s[0] = statusInvalidMemoryAccess
		return
	}
	s[0] = uint64(v.h.shared.set(key, val, cas))
}

// SharedData returns a copy of the value stored under key and its CAS.
func (h *Host) SharedData(key string) (value []byte, cas uint32, ok bool) {
	v, ok := h.shared.get([]byte(key))
	if !ok {
		return nil, 0, false
	}
	return append([]byte(nil), v.data...), v.cas, true
}

// SetSharedData stores value under key unconditionally, as a set with CAS 0
// from another plugin of the same vm_id would.
func (h *Host) SetSharedData(key string, value []byte) {
	h.shared.set([]byte(key), value, 0)
}

// SharedDataKeys lists the keys in the store, in no particular order.
func (h *Host) SharedDataKeys() []string {
	var out []string
	for i := range h.shared.shards {
		sh := &h.shared.shards[i]
		sh.mu.RLock()
		for k := range sh.m {
			out = append(out, k)
		}
		sh.mu.RUnlock()
	}
	return out
}
