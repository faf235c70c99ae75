package doctor

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// filesystemOf returns the type and the mount and superblock options of the
// filesystem holding dir, from /proc/self/mountinfo (the mount whose mount
// point is the longest prefix of dir's real path).
func filesystemOf(dir string) (string, []string, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", nil, err
	}
	if real, err = filepath.Abs(real); err != nil {
		return "", nil, err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	fsType, opts, ok, err := mountOf(f, real)
	if err != nil {
		return "", nil, err
	}
	if !ok {
		return "", nil, fmt.Errorf("no mount holds %s", real)
	}
	return fsType, opts, nil
}

// mountOf finds path's mount in mountinfo text (proc(5)).
func mountOf(r io.Reader, path string) (fsType string, opts []string, ok bool, err error) {
	best := -1
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		pre, post, found := strings.Cut(sc.Text(), " - ")
		if !found {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 6 || len(b) < 3 {
			continue
		}
		mp := unescapeMount(a[4])
		if !within(path, mp) || len(mp) < best { // a later mount on the same point hides the earlier
			continue
		}
		best = len(mp)
		fsType = b[0]
		opts = nil
		for _, o := range append(strings.Split(a[5], ","), strings.Split(b[2], ",")...) {
			if !slices.Contains(opts, o) {
				opts = append(opts, o)
			}
		}
		ok = true
	}
	return fsType, opts, ok, sc.Err()
}

func within(path, mountPoint string) bool {
	if mountPoint == "/" {
		return true
	}
	return path == mountPoint || strings.HasPrefix(path, mountPoint+"/")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	oct := func(c byte) bool { return c >= '0' && c <= '7' }
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && oct(s[i+1]) && oct(s[i+2]) && oct(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
