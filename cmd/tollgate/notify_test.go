package main

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// sd_notify: one datagram to $NOTIFY_SOCKET, a path or (Linux) an
// abstract name; nothing without it; an odd name is an error, not a
// datagram somewhere else.
func TestSdNotify(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if err := sdNotify("READY=1"); err != nil {
		t.Fatalf("without NOTIFY_SOCKET: %v", err)
	}
	names := []string{filepath.Join(t.TempDir(), "notify")}
	if runtime.GOOS == "linux" {
		names = append(names, "@tollgate-test-"+filepath.Base(t.TempDir()))
	}
	for _, name := range names {
		ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("NOTIFY_SOCKET", name)
		if err := sdNotify("MAINPID=42\nREADY=1"); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ln.SetReadDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, 100)
		n, err := ln.Read(b)
		ln.Close()
		if err != nil || string(b[:n]) != "MAINPID=42\nREADY=1" {
			t.Fatalf("%s: read %q %v", name, b[:n], err)
		}
	}
	t.Setenv("NOTIFY_SOCKET", "relative/path")
	if err := sdNotify("READY=1"); err == nil {
		t.Fatal("a relative NOTIFY_SOCKET: no error")
	}
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "nobody-listens"))
	if err := sdNotify("READY=1"); err == nil {
		t.Fatal("a NOTIFY_SOCKET nobody listens on: no error")
	}
}

// A binary replaced at its path (a package upgrade renames a new file over
// it) is told apart from the one running; the same file is not.
func TestRunningBinaryReplaced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tollgate")
	if err := os.WriteFile(path, []byte("v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	b := runningBinary{path: path, st: st}
	if b.replaced() {
		t.Fatal("the same file reads as replaced")
	}
	if err := os.WriteFile(path+".new", []byte("v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	if !b.replaced() {
		t.Fatal("a file renamed over the binary does not read as replaced")
	}
	os.Remove(path)
	if b.replaced() {
		t.Fatal("a missing binary reads as replaced: nothing to hand over to")
	}
	// This process: the file it runs is the one at its path.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if newRunningBinary(exe).replaced() {
		t.Fatal("the test binary reads as replaced")
	}
}
