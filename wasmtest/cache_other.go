//go:build !unix

package wasmtest

import (
	"fmt"
	"os"
)

// checkPrivateDir refuses dir unless it is a directory. Ownership is left
// to the platform's access control lists.
func checkPrivateDir(dir string) error {
	info, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("not a directory (a symbolic link is not followed)")
	}
	return nil
}
