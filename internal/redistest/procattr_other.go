//go:build !linux

package redistest

import "syscall"

// childProcAttr has nothing to add outside Linux: there is no portable way to
// tie a child's life to its parent's, so the t.Cleanup hooks are all we have.
func childProcAttr() *syscall.SysProcAttr {
	return nil
}
