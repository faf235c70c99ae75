//go:build !linux

package doctor

import "errors"

// filesystemOf is Linux-only: elsewhere the check says it could not tell.
func filesystemOf(string) (string, []string, error) {
	return "", nil, errors.New("filesystem type is checked on Linux only")
}
