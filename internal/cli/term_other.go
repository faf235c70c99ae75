//go:build !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd

package cli

import "os"

// isTerminal falls back to "is a character device", which also holds for
// /dev/null: there, the confirmation prompt reads end of file and declines.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
