// Package proc reads what the benchmark commands and the end-to-end tests
// need to know of a process from Linux's /proc: its parent, state and CPU
// time, its children, its environment and its open descriptors.
//
// It imports only the standard library (the bench commands use it too).
package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Stat is what /proc/<pid>/stat tells of a process.
type Stat struct {
	PID, PPID int
	// State is the process state letter: R running, S sleeping, Z zombie…
	State byte
	// CPU is the user and system time, at /proc's 10 ms resolution.
	CPU time.Duration
}

// ReadStat reads /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return parseStat(pid, b)
}

// userHZ is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100 on
// every Linux architecture Go supports).
const userHZ = 100

// parseStat parses "pid (comm) state ppid ... utime stime ...". The
// command name may hold spaces and parentheses, so the fields are counted
// from its last ')'.
func parseStat(pid int, b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, fmt.Errorf("/proc/%d/stat: no command name in %q", pid, b)
	}
	// After the name: state(0) ppid(1) pgrp session tty_nr tpgid flags
	// minflt cminflt majflt cmajflt utime(11) stime(12) ...
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want at least 13", pid, len(f))
	}
	s := Stat{PID: pid, State: f[0][0]}
	var err error
	if s.PPID, err = strconv.Atoi(f[1]); err != nil {
		return Stat{}, fmt.Errorf("/proc/%d/stat: ppid: %w", pid, err)
	}
	ut, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("/proc/%d/stat: utime: %w", pid, err)
	}
	st, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("/proc/%d/stat: stime: %w", pid, err)
	}
	s.CPU = time.Duration(ut+st) * (time.Second / userHZ)
	return s, nil
}

// CPU returns the user and system CPU time of pid, 0 if it cannot be read
// (the process is gone, or this is not Linux).
func CPU(pid int) time.Duration {
	s, err := ReadStat(pid)
	if err != nil {
		return 0
	}
	return s.CPU
}

// Children returns the processes whose parent is pid, zombies included.
// A process that exits while the list is read is left out.
func Children(pid int) ([]Stat, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []Stat
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process
		}
		s, err := ReadStat(child)
		if err != nil {
			continue
		}
		if s.PPID == pid {
			out = append(out, s)
		}
	}
	return out, nil
}

// Environ returns the environment pid was started with, one "KEY=value" an
// entry.
func Environ(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), nil
}

// OpenFDs returns how many file descriptors pid holds open.
func OpenFDs(pid int) (int, error) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return 0, err
	}
	return len(ents), nil
}

// Threads lists the thread ids of a process (/proc/<pid>/task).
func Threads(pid int) ([]int, error) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, tid)
		}
	}
	return out, nil
}

// Stopped reports whether every thread of a process is stopped (state T):
// kill(2) returns before a SIGSTOP has stopped them all.
func Stopped(pid int) bool {
	tids, err := Threads(pid)
	if err != nil || len(tids) == 0 {
		return false
	}
	for _, tid := range tids {
		st, err := ReadStat(tid)
		if err != nil || st.State != 'T' {
			return false
		}
	}
	return true
}

// RSSKiB returns process pid's resident set (VmRSS of /proc/<pid>/status)
// in KiB; pid 0 is this process.
func RSSKiB(pid int) (int64, error) {
	name := "/proc/self/status"
	if pid != 0 {
		name = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("%s: no VmRSS", name)
}
