package redistest

import "syscall"

// sysProcAttr kills the server when the test binary that started it dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
