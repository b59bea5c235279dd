//go:build !unix

package accountant

import (
	"fmt"
	"os"
	"path/filepath"
)

// LockName is the file under the data directory an accountant holds while
// it runs (unlocked on this platform: only its writability is checked).
const LockName = "accountant.lock"

func lockDataDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, LockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("accountant: the data directory %s is not writable: %w (the accountant keeps decisions.jsonl and governance.db there; fix its permissions or pass another --data)", dir, err)
	}
	return f, nil
}
