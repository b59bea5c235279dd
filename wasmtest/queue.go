package wasmtest

import (
	"sync"
)

// Shared queues: a VM registers a queue by name and owns it; any VM of the
// host may resolve it and enqueue; each enqueue tells the owner with
// proxy_on_queue_ready on its root context, delivered when its VM is free.

type queueStore struct {
	mu     sync.Mutex
	byName map[string]uint32
	queues []*sharedQueue // token = index + 1
}

type sharedQueue struct {
	owner *vm
	mu    sync.Mutex
	items [][]byte
}

func newQueueStore() *queueStore { return &queueStore{byName: map[string]uint32{}} }

func (q *queueStore) lookup(token uint32) *sharedQueue {
	q.mu.Lock()
	defer q.mu.Unlock()
	if token == 0 || int(token) > len(q.queues) {
		return nil
	}
	return q.queues[token-1]
}

// proxy_register_shared_queue(name_ptr, name_size, ret_token)
func hostRegisterQueue(v *vm, s []uint64) {
	name, ok := v.read(uint32(s[0]), uint32(s[1]))
	if !ok {
		s[0] = statusInvalidMemoryAccess
		return
	}
	q := v.h.queues
	q.mu.Lock()
	key := v.h.cfg.VMID + "\x00" + string(name)
	tok, found := q.byName[key]
	if found {
		q.queues[tok-1].owner = v
	} else {
		q.queues = append(q.queues, &sharedQueue{owner: v})
		tok = uint32(len(q.queues))
		q.byName[key] = tok
	}
	q.mu.Unlock()
	if !v.putU32(uint32(s[2]), tok) {
		s[0] = statusInvalidMemoryAccess
		return
	}
	s[0] = statusOK
}

// proxy_resolve_shared_queue(vm_id_ptr, vm_id_size, name_ptr, name_size, ret_token)
func hostResolveQueue(v *vm, s []uint64) {
	vmid, ok1 := v.read(uint32(s[0]), uint32(s[1]))
	name, ok2 := v.read(uint32(s[2]), uint32(s[3]))
	if !ok1 || !ok2 {
		s[0] = statusInvalidMemoryAccess
		return
	}
	q := v.h.queues
	q.mu.Lock()
	tok, found := q.byName[string(vmid)+"\x00"+string(name)]
	q.mu.Unlock()
	if !found {
		s[0] = statusNotFound
		return
	}
	if !v.putU32(uint32(s[4]), tok) {
		s[0] = statusInvalidMemoryAccess
		return
	}
	s[0] = statusOK
}

// proxy_enqueue_shared_queue(token, data_ptr, data_size)
func hostEnqueueQueue(v *vm, s []uint64) {
	tok := uint32(s[0])
	data, ok := v.read(uint32(s[1]), uint32(s[2]))
	if !ok {
		s[0] = statusInvalidMemoryAccess
		return
	}
	sq := v.h.queues.lookup(tok)
	if sq == nil {
		s[0] = statusNotFound
		return
	}
	sq.mu.Lock()
	sq.items = append(sq.items, append([]byte(nil), data...))
	owner := sq.owner
	sq.mu.Unlock()
	go owner.queueReady(tok)
	s[0] = statusOK
}

// proxy_dequeue_shared_queue(token, ret_ptr, ret_size)
func hostDequeueQueue(v *vm, s []uint64) {
	tok := uint32(s[0])
	sq := v.h.queues.lookup(tok)
	if sq == nil {
		s[0] = statusNotFound
		return
	}
	sq.mu.Lock()
	if len(sq.items) == 0 {
		sq.mu.Unlock()
		s[0] = statusEmpty
		return
	}
	item := sq.items[0]
	sq.items = sq.items[1:]
	sq.mu.Unlock()
	s[0] = uint64(v.outBytes(item, uint32(s[1]), uint32(s[2])))
}

func (v *vm) queueReady(tok uint32) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed || v.failed.Load() || !v.rootAlive {
		return
	}
	v.enterRoot()
	v.call(v.fn.queueReady, "proxy_on_queue_ready", uint64(v.rootID), uint64(tok))
	v.afterCall(nil)
}
