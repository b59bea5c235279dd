package proxywasm

// Shared data is one key-value store per host process and vm_id, shared by
// every worker VM. Every successful set gives the key a new cas from a
// global counter; a set with a stale non-zero cas fails with
// types.ErrorStatusCasMismatch; a set with cas 0, or of a missing key,
// always succeeds (fact sheet 3.4). Read, compute, set with the cas read,
// and retry on a mismatch.

// GetSharedData returns the value of key and its cas;
// types.ErrorStatusNotFound when the key is missing.
func GetSharedData(key string) (value []byte, cas uint32, err error) {
	return GetSharedDataInto(key, nil)
}

// GetSharedDataInto is GetSharedData that receives the value into dst when
// it fits in cap(dst), so a hot loop over small cells does not allocate:
// value is then dst[:len(value)]. A larger value gets a fresh slice.
func GetSharedDataInto(key string, dst []byte) (value []byte, cas uint32, err error) {
	sharedDataOps.Add(1)
	v, cas, st := hGetSharedData(key, dst[:cap(dst)])
	if st != 0 {
		return nil, 0, statusToError(st)
	}
	return v, cas, nil
}

// SetSharedData stores value under key if cas is still the key's cas (or
// cas is 0, or the key is missing).
func SetSharedData(key string, value []byte, cas uint32) error {
	sharedDataOps.Add(1)
	return statusToError(hSetSharedData(key, value, cas))
}
