//go:build unix

package accountant

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockName is the file under the data directory an accountant holds an
// exclusive lock on while it runs, so two accountants never append to the
// same decisions.jsonl (each would count only its own rows, and a retry
// answered by the other could be recorded twice).
const LockName = "accountant.lock"

// lockDataDir takes the data directory's lock, writing this process's id
// into the file for whoever finds it held. The lock goes with the process:
// a crash (kill -9) releases it.
func lockDataDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("accountant: the data directory %s is not writable: %w (the accountant keeps decisions.jsonl and governance.db there; fix its permissions or pass another --data)", dir, errors.Unwrap(err))
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = fmt.Sprintf(" (process %d)", pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("accountant: the data directory %s is in use by another accountant%s; stop it first, or pass another --data", dir, holder)
		}
		return nil, fmt.Errorf("accountant: locking the data directory %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
