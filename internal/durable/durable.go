// Package durable holds the file-system steps that make a write survive a
// crash, for the packages that keep files of their own (the store, the
// audit file sink, the usage ledger's day files).
package durable

import "os"

// SyncDir fsyncs a directory, so that a file created or renamed in it is
// still there after a crash: the new directory entry is on disk too.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
