//go:build !linux

package redistest

import "syscall"

// sysProcAttr: without a parent-death signal the server is ended by
// t.Cleanup only.
func sysProcAttr() *syscall.SysProcAttr { return nil }
