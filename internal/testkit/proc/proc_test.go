//go:build linux

package proc

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	// A command name with spaces and parentheses; utime 250, stime 50.
	line := "42 (a) b (c)) S 7 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 1 1 1\n"
	s, err := parseStat(42, []byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Stat{PID: 42, PPID: 7, State: 'S', CPU: 3 * time.Second}); s != want {
		t.Fatalf("got %+v, want %+v", s, want)
	}
	for _, bad := range []string{"", "42 no name S 7", "42 (x) S 7 1 2", "42 (x) S seven 42 42 0 -1 4194560 100 0 0 0 250 50", "42 (x) S 7 42 42 0 -1 4194560 100 0 0 0 x 50"} {
		if _, err := parseStat(42, []byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// This process and a child it starts, as /proc shows them.
func TestLiveProcess(t *testing.T) {
	t.Parallel()
	self, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self.PPID != os.Getppid() || self.State == 'Z' {
		t.Fatalf("self: %+v, parent %d", self, os.Getppid())
	}
	cmd := exec.Command("sleep", "30")
	cmd.Env = append(os.Environ(), "PROC_TEST_MARK=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	kids, err := Children(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(kids, func(s Stat) bool { return s.PID == cmd.Process.Pid }) {
		t.Fatalf("children %+v lack %d", kids, cmd.Process.Pid)
	}
	// Right after fork the child's environ is empty (or the parent's
	// being replaced) until it has exec'd.
	env, err := Environ(cmd.Process.Pid)
	for deadline := time.Now().Add(5 * time.Second); err == nil && !slices.Contains(env, "PROC_TEST_MARK=1") && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		env, err = Environ(cmd.Process.Pid)
	}
	if err != nil || !slices.Contains(env, "PROC_TEST_MARK=1") {
		t.Fatalf("environ %v, %v", env, err)
	}
	if slices.ContainsFunc(env, func(e string) bool { return strings.Contains(e, "\x00") || e == "" }) {
		t.Fatalf("environ not split: %q", env)
	}
	if n, err := OpenFDs(os.Getpid()); err != nil || n < 3 {
		t.Fatalf("open descriptors: %d, %v", n, err)
	}
	if _, err := ReadStat(-1); err == nil {
		t.Fatal("pid -1 read")
	}
	if CPU(-1) != 0 {
		t.Fatal("CPU of no process")
	}
}
