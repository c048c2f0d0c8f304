//go:build linux

package redistest

import "syscall"

// childProcAttr makes a child process receive SIGKILL when the test binary
// dies without running its cleanups (a panic, a timeout, a kill -9), so that
// no redis-server or helper process outlives the test run.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
