//go:build unix

package wasmtest

import (
	"fmt"
	"os"
	"syscall"
)

// checkPrivateDir refuses dir unless it is a directory (not a symbolic
// link) owned by this process's user and writable by no other.
func checkPrivateDir(dir string) error {
	info, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("not a directory (a symbolic link is not followed)")
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("owned by uid %d, not by this user (uid %d)", st.Uid, os.Geteuid())
	}
	if info.Mode().Perm()&0o022 != 0 {
		return errSharedDir
	}
	return nil
}
