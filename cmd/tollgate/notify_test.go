package main

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
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

// The packages' post-install script reloads (a handover) rather than
// restarts a running version whose status says it can hand over: the
// pattern it matches is in the status serve reports.
func TestPostinstallMatchesServingStatus(t *testing.T) {
	b, err := os.ReadFile("../../packaging/files/postinstall.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\*"([^"]+)"\*\) systemctl reload tollgate\.service`).FindSubmatch(b)
	if m == nil {
		t.Fatal("postinstall.sh does not reload a version that can hand over")
	}
	if !strings.Contains(statusServing, string(m[1])) {
		t.Fatalf("postinstall.sh looks for %q in the status text, serve reports %q", m[1], statusServing)
	}
}

// A handover starts what is at the path the process was started by, so a
// symlink switched to a new version is followed (os.Executable would name
// the old version's file).
func TestStartedFromFollowsASwitchedSymlink(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		if err := os.WriteFile(filepath.Join(dir, v), []byte(v), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "tollgate")
	if err := os.Symlink("v1", link); err != nil {
		t.Fatal(err)
	}
	arg0 := os.Args[0]
	defer func() { os.Args[0] = arg0 }()
	os.Args[0] = link
	if got := startedFrom("/elsewhere"); got != link {
		t.Fatalf("startedFrom = %q, want the symlink %q", got, link)
	}
	os.Args[0] = "no-such-tollgate-in-path"
	if got := startedFrom("/elsewhere"); got != "/elsewhere" {
		t.Fatalf("startedFrom with an unresolvable argv[0] = %q, want the executable", got)
	}
	st, _ := os.Stat(filepath.Join(dir, "v1"))
	b := runningBinary{path: link, st: st}
	if b.replaced() {
		t.Fatal("replaced before the switch")
	}
	os.Remove(link)
	if err := os.Symlink("v2", link); err != nil {
		t.Fatal(err)
	}
	if !b.replaced() {
		t.Fatal("a symlink switched to a new version does not read as replaced")
	}
}
