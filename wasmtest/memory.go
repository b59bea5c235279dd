package wasmtest

import "encoding/binary"

// Guest memory access. Views returned by read alias guest memory and are
// valid only until the guest runs again (an allocation may grow and move
// the memory), so nothing keeps one across alloc.

func (v *vm) read(ptr, size uint32) ([]byte, bool) {
	if size == 0 {
		return nil, true
	}
	return v.mem.Read(ptr, size)
}

func (v *vm) putU32(ptr, val uint32) bool { return v.mem.WriteUint32Le(ptr, val) }

func (v *vm) putU64(ptr uint32, val uint64) bool { return v.mem.WriteUint64Le(ptr, val) }

// alloc asks the guest for n > 0 bytes through its allocator, run in the
// restricted mode cpp-host uses for malloc. A trap inside the allocator fails
// the VM and unwinds the calling guest as well.
func (v *vm) alloc(n int) (uint32, bool) {
	if n <= 0 || uint64(n) > 1<<31 {
		return 0, false
	}
	prev := v.restrict
	v.restrict = restrictAlloc
	v.h.allocations.Add(1)
	v.allocStack[0] = uint64(n)
	v.total.GuestCalls++
	v.counts.GuestCalls++
	err := v.fn.alloc.CallWithStack(v.ctx, v.allocStack[:])
	v.restrict = prev
	if err != nil {
		v.fail("proxy_on_memory_allocate", err)
		panic(&trapError{msg: v.failure})
	}
	p := uint32(v.allocStack[0])
	if p == 0 {
		return 0, false
	}
	if uint64(p)+uint64(n) > uint64(v.mem.Size()) {
		return 0, false
	}
	return p, true
}

// allocView allocates n bytes in the guest and returns a writable view.
func (v *vm) allocView(n int) (uint32, []byte, bool) {
	p, ok := v.alloc(n)
	if !ok {
		return 0, nil, false
	}
	b, ok := v.mem.Read(p, uint32(n))
	return p, b, ok
}

// setOut writes the (pointer, size) pair of a result.
func (v *vm) setOut(pp, sp, p uint32, n int) status {
	if !v.putU32(pp, p) || !v.putU32(sp, uint32(n)) {
		return statusInvalidMemoryAccess
	}
	return statusOK
}

// outBytes hands data to the guest: a fresh guest allocation holding a copy,
// or (0,0) without calling the allocator when data is empty.
func (v *vm) outBytes(data []byte, pp, sp uint32) status { return outData(v, data, pp, sp) }

// outString is outBytes for a string, without converting it.
func (v *vm) outString(s string, pp, sp uint32) status { return outData(v, s, pp, sp) }

// outData is outBytes and outString: one body for either kind of data.
func outData[T string | []byte](v *vm, data T, pp, sp uint32) status {
	if len(data) == 0 {
		return v.setOut(pp, sp, 0, 0)
	}
	p, b, ok := v.allocView(len(data))
	if !ok {
		return statusInvalidMemoryAccess
	}
	copy(b, data)
	return v.setOut(pp, sp, p, len(data))
}

// outPairs serialises m straight into a guest allocation.
func (v *vm) outPairs(m hmap, pp, sp uint32) status {
	n := m.pairsSize()
	if n == 0 {
		return v.setOut(pp, sp, 0, 0)
	}
	p, b, ok := v.allocView(n)
	if !ok {
		return statusInvalidMemoryAccess
	}
	m.marshalTo(b)
	return v.setOut(pp, sp, p, n)
}

// outU64 hands an 8-byte little-endian integer (a property value) to the guest.
func (v *vm) outU64(x uint64, pp, sp uint32) status {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], x)
	return v.outBytes(b[:], pp, sp)
}
