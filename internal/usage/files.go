package usage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/tollgate/tollgate/internal/durable"
)

// The ledger's files: <dir>/YYYY-MM-DD.jsonl, one per UTC day, one minute
// per line, appended and fsync'd. Old days are dropped by removing their
// file, never by rewriting one.
const (
	fileExt   = ".jsonl"
	dayLayout = "2006-01-02"
	// maxLine bounds one line read back (a minute of usage.max_keys rows
	// is a few MB): a corrupted file without newlines is an error, not
	// memory.
	maxLine = 64 << 20
)

// dayFile is one day's file.
type dayFile struct {
	day  time.Time // 00:00 UTC
	path string
}

// listDays lists the day files in dir, oldest first; a missing dir has
// none. Other files (the topic marker, an operator's notes) are ignored.
func listDays(dir string) ([]dayFile, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []dayFile
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, fileExt) {
			continue
		}
		d, err := time.Parse(dayLayout, strings.TrimSuffix(name, fileExt))
		if err != nil {
			continue
		}
		out = append(out, dayFile{day: d, path: filepath.Join(dir, name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].day.Before(out[j].day) })
	return out, nil
}

// completeLines splits complete lines only: a last line without its
// newline is a write in progress (or torn by a crash) and is not read.
func completeLines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF {
		return len(data), nil, nil
	}
	return 0, nil, nil
}

// scanFile calls fn with each complete line of r (1-based line numbers)
// and returns the offset just past the last complete line.
func scanFile(r io.Reader, fn func(n int, line []byte) error) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	sc.Split(completeLines)
	var off int64
	n := 0
	for sc.Scan() {
		line := sc.Bytes()
		if line == nil {
			break // the incomplete tail
		}
		n++
		off += int64(len(line)) + 1
		if err := fn(n, line); err != nil {
			return off, err
		}
	}
	if err := sc.Err(); err != nil {
		return off, fmt.Errorf("line %d: %w", n+1, err)
	}
	return off, nil
}

// recoverLast finds the last minute written in dir, newest file first.
// The newest file's incomplete last line (a write a crash cut short) is
// cut off, so that the next line starts on a line of its own. A complete
// line that is not a minute is kept (nothing is destroyed) and skipped.
func recoverLast(dir string, warn func(msg string, args ...any)) (last int64, found bool, err error) {
	days, err := listDays(dir)
	if err != nil {
		return 0, false, err
	}
	for i := len(days) - 1; i >= 0; i-- {
		path := days[i].path
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return 0, false, err
		}
		off, err := scanFile(f, func(n int, line []byte) error {
			m, err := decodeMinute(line)
			if err != nil {
				warn("usage ledger: unreadable line kept and skipped", "file", path, "line", n, "err", err)
				return nil
			}
			if um := unixMinute(m.Minute); !found || um > last {
				last, found = um, true
			}
			return nil
		})
		if err != nil {
			f.Close()
			return 0, false, fmt.Errorf("%s: %w", path, err)
		}
		if i == len(days)-1 {
			if st, err := f.Stat(); err == nil && st.Size() > off {
				warn("usage ledger: cutting off an incomplete last line (a write interrupted by a crash)", "file", path, "bytes", st.Size()-off)
				if err := f.Truncate(off); err != nil {
					f.Close()
					return 0, false, fmt.Errorf("%s: %w", path, err)
				}
				if err := f.Sync(); err != nil {
					f.Close()
					return 0, false, fmt.Errorf("%s: %w", path, err)
				}
			}
		}
		f.Close()
		if found {
			return last, true, nil
		}
	}
	return 0, false, nil
}

// appender appends minutes to the day files of dir.
type appender struct {
	dir  string
	day  string
	f    *os.File
	size int64
}

// append writes m's line to its day's file and fsyncs it. A failed write
// is cut back off, so the file never keeps half a line.
func (a *appender) append(m *Minute) ([]byte, error) {
	line, err := m.encode()
	if err != nil {
		return nil, err
	}
	if day := m.Minute.UTC().Format(dayLayout); a.f == nil || day != a.day {
		if err := a.open(day); err != nil {
			return nil, err
		}
	}
	if _, err := a.f.Write(line); err != nil {
		a.f.Truncate(a.size)
		return nil, fmt.Errorf("write %s: %w", a.f.Name(), err)
	}
	if err := a.f.Sync(); err != nil {
		a.f.Truncate(a.size)
		return nil, fmt.Errorf("fsync %s: %w", a.f.Name(), err)
	}
	a.size += int64(len(line))
	return line, nil
}

func (a *appender) open(day string) error {
	a.close()
	if err := os.MkdirAll(a.dir, 0o700); err != nil {
		return err
	}
	path := filepath.Join(a.dir, day+fileExt)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// The new file's name must survive a crash too.
		if err := durable.SyncDir(a.dir); err != nil {
			f.Close()
			return err
		}
	}
	a.f, a.day, a.size = f, day, st.Size()
	return nil
}

func (a *appender) close() error {
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f, a.day = nil, ""
	return err
}

// prune removes the day files whose last minute is older than
// now-retention, and returns their paths.
func prune(dir string, now time.Time, retention time.Duration) ([]string, error) {
	days, err := listDays(dir)
	if err != nil {
		return nil, err
	}
	cutoff := now.Add(-retention)
	var removed []string
	var errs []error
	for _, d := range days {
		if d.day.Add(24 * time.Hour).After(cutoff) {
			break
		}
		if err := os.Remove(d.path); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, d.path)
	}
	return removed, errors.Join(errs...)
}

// Minutes calls fn with each readable minute in dir that starts after
// after, oldest first, with its line (newline included). Unreadable lines
// are skipped (Read names them).
func Minutes(dir string, after time.Time, fn func(m *Minute, line []byte) error) error {
	days, err := listDays(dir)
	if err != nil {
		return err
	}
	for _, d := range days {
		if !d.day.Add(24 * time.Hour).After(after) {
			continue
		}
		f, err := os.Open(d.path)
		if err != nil {
			return err
		}
		_, err = scanFile(f, func(_ int, line []byte) error {
			m, err := decodeMinute(line)
			if err != nil || !m.Minute.After(after) {
				return nil
			}
			return fn(&m, append(append([]byte(nil), line...), '\n'))
		})
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", d.path, err)
		}
	}
	return nil
}
