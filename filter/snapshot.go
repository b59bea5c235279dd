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
	// fleet, when set, says why the other replicas' spend in the entries is
	// only as last read (syncwire.Snapshot.Fleet).
	fleet string
}

// The snapshot travels between VMs through shared data in a compact binary
// form, written once by the VM that polled the accountant and decoded by
// each VM when its version changes:
//
//	u8 2 | i64 generated_at (unix ns) | u16 len, fleet | u32 n | n × (u16 len, id, i64 period_start, i64 value)
//
// Format 1 had no fleet field; it still decodes.
const snapFormat = 2

func appendSnapshot(dst []byte, generatedAt time.Time, fleet string, ids []string, starts, values []int64) []byte {
	dst = append(dst, snapFormat)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(generatedAt.UnixNano()))
	if len(fleet) > 0xffff {
		fleet = fleet[:0xffff]
	}
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(fleet)))
	dst = append(dst, fleet...)
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
	if len(b) < 13 || (b[0] != snapFormat && b[0] != 1) {
		return nil, errSnapshotFormat
	}
	s := &snapshot{version: version, generatedAt: time.Unix(0, int64(binary.LittleEndian.Uint64(b[1:]))).UTC()}
	p := 9
	if b[0] == snapFormat {
		l := int(binary.LittleEndian.Uint16(b[p:]))
		p += 2
		if p+l+4 > len(b) {
			return nil, errSnapshotFormat
		}
		s.fleet = string(b[p : p+l])
		p += l
	}
	n := int(binary.LittleEndian.Uint32(b[p:]))
	p += 4
	if n > len(b) {
		return nil, errSnapshotFormat
	}
	s.entries = make(map[string]snapEntry, n)
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
