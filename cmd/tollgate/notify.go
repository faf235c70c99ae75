package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// sdNotify tells the service manager about this process (systemd's
// sd_notify protocol, without libsystemd: one datagram of newline-separated
// KEY=VALUE assignments to the unix socket named by $NOTIFY_SOCKET, an
// abstract one when the name starts with '@'). Without $NOTIFY_SOCKET it
// does nothing. The unit runs Type=notify with NotifyAccess=all, so that a
// new process started by a handover may say MAINPID= (it is the service's
// main process from then on) before the old one exits.
func sdNotify(state string) error {
	name := os.Getenv("NOTIFY_SOCKET")
	if name == "" {
		return nil
	}
	if name[0] != '/' && name[0] != '@' {
		return &net.OpError{Op: "sd_notify", Net: "unixgram", Err: os.ErrInvalid}
	}
	if name[0] == '@' && runtime.GOOS != "linux" {
		return nil // abstract sockets are Linux's
	}
	// Go maps a leading '@' to the abstract namespace.
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}

// runningBinary is the file this process runs, to tell when a package
// upgrade has replaced the file at its path.
type runningBinary struct {
	path string
	st   os.FileInfo
}

// newRunningBinary records the file this process runs: on Linux the image
// itself (/proc/self/exe, even if it was replaced before this call), else
// the file at path now.
func newRunningBinary(path string) runningBinary {
	st, err := os.Stat("/proc/self/exe")
	if err != nil {
		st, _ = os.Stat(path)
	}
	return runningBinary{path: path, st: st}
}

// replaced reports whether the file at the path this process was started
// from is no longer the one it runs.
func (b runningBinary) replaced() bool {
	if b.st == nil || b.path == "" {
		return false
	}
	st, err := os.Stat(b.path)
	if err != nil {
		return false // being replaced, or gone: nothing to hand over to
	}
	return !os.SameFile(st, b.st) || !st.ModTime().Equal(b.st.ModTime()) || st.Size() != b.st.Size()
}

// startedFrom is the path this process was started by — argv[0], looked up
// in PATH if it has no slash, made absolute — so that a handover starts
// what is at that path now, a symlink switched to a new version included.
// exe (os.Executable, the file itself) when argv[0] cannot be resolved.
func startedFrom(exe string) string {
	p := os.Args[0]
	if !strings.Contains(p, "/") {
		lp, err := exec.LookPath(p)
		if err != nil {
			return exe
		}
		p = lp
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return exe
	}
	if _, err := os.Stat(abs); err != nil {
		return exe
	}
	return abs
}
