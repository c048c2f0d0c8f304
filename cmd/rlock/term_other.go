//go:build !linux

package main

import "os"

// isTerminal reports whether f is a character device: a terminal, or a
// device such as /dev/null (where the prompt then reads end of file and
// declines).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
