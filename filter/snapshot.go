package filter

import (
	"encoding/binary"
	"errors"
	"time"
)

// snapEntry is one LedgerSettled counter from the accountant's snapshot.
type snapEntry struct {
	periodStart int64 // unix seconds of the calendar period it counts
	value       int64 // nanodollars, tokens or requests
}

// snapshot is the VM's decoded copy of the spend snapshot.
type snapshot struct {
	version     string
	generatedAt time.Time
	entries     map[string]snapEntry
}

// The snapshot travels between VMs through shared data in a compact binary
// form, written once by the VM that polled the accountant and decoded by
// each VM when its version changes:
//
//	u8 1 | i64 generated_at (unix ns) | u32 n | n × (u16 len, id, i64 period_start, i64 value)
const snapFormat = 1

func appendSnapshot(dst []byte, generatedAt time.Time, ids []string, starts, values []int64) []byte {
	dst = append(dst, snapFormat)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(generatedAt.UnixNano()))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(ids)))
	for i, id := range ids {
		if len(id) > 0xffff {
			id = id[:0xffff] // identities are short; never reached
		}
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(id)))
		dst = append(dst, id...)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(starts[i]))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(values[i]))
	}
	return dst
}

var errSnapshotFormat = errors.New("spend snapshot in shared data is unreadable")

func decodeSnapshot(b []byte, version string) (*snapshot, error) {
	if len(b) < 13 || b[0] != snapFormat {
		return nil, errSnapshotFormat
	}
	s := &snapshot{version: version, generatedAt: time.Unix(0, int64(binary.LittleEndian.Uint64(b[1:]))).UTC()}
	n := int(binary.LittleEndian.Uint32(b[9:]))
	if n > len(b) {
		return nil, errSnapshotFormat
	}
	s.entries = make(map[string]snapEntry, n)
	p := 13
	for i := 0; i < n; i++ {
		if p+2 > len(b) {
			return nil, errSnapshotFormat
		}
		l := int(binary.LittleEndian.Uint16(b[p:]))
		p += 2
		if p+l+16 > len(b) {
			return nil, errSnapshotFormat
		}
		id := string(b[p : p+l])
		p += l
		s.entries[id] = snapEntry{
			periodStart: int64(binary.LittleEndian.Uint64(b[p:])),
			value:       int64(binary.LittleEndian.Uint64(b[p+8:])),
		}
		p += 16
	}
	return s, nil
}
