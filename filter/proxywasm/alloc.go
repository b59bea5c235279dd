package proxywasm

// The host hands data to the guest by calling proxy_on_memory_allocate and
// copying into the block it returns (fact sheet 1.1).
var (
	// allocSteer, when set, is the destination of the next allocation that
	// fits in it, so a caller can receive host data into its own buffer
	// (GetSharedDataInto). It is cleared by that allocation and after the
	// host call.
	allocSteer []byte
	// lastAlloc keeps the newest block reachable until the host has
	// written its address into a Go variable.
	lastAlloc []byte
	// zeroAlloc answers a request for 0 bytes: a valid, non-nil address
	// that nothing is written to.
	zeroAlloc [8]byte
)

// maxAlloc is V8's cap on linear memory; a larger request fails (returns
// 0, which the host reports as an allocation failure) instead of trapping.
const maxAlloc = 1 << 30

// allocate implements proxy_on_memory_allocate. It never panics: size 0
// gets a valid non-nil pointer, a size past maxAlloc gets nil.
func allocate(size uint32) *byte {
	if size == 0 {
		return &zeroAlloc[0]
	}
	if size > maxAlloc {
		return nil
	}
	if uint64(size) <= uint64(len(allocSteer)) {
		p := &allocSteer[0]
		allocSteer = nil
		return p
	}
	b := make([]byte, size)
	lastAlloc = b
	return &b[0]
}
