//go:build unix

package wasmtest

import (
	"fmt"
	"os"
	"syscall"
)

// checkOwner refuses a directory not owned by this process's user, or
// writable by another.
func checkOwner(info os.FileInfo) error {
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("owned by uid %d, not by this user (uid %d)", st.Uid, os.Geteuid())
	}
	if info.Mode().Perm()&0o022 != 0 {
		return errSharedDir
	}
	return nil
}
