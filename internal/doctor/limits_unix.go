//go:build unix

package doctor

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// openFilesLimit is this process's soft RLIMIT_NOFILE. The Go runtime raises
// the soft limit to the hard one at start, in `tollgate serve` as here, so
// this is the limit the gateway will run with under the same user and unit.
func openFilesLimit() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	return uint64(rl.Cur), nil
}

// lockFree reports an error when another process holds path's lock (bbolt
// takes an exclusive flock on its file); a missing file is free. A shared,
// non-blocking lock taken and released at once disturbs no one.
func lockFree(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%s is locked by another process", path)
		}
		return fmt.Errorf("%s: lock: %w", path, err)
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
