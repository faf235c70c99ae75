package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/tollgate/tollgate/internal/durable"
)

// FileSink appends events to a JSON-lines file: one event per line, each
// written with a single write(2) on an O_APPEND descriptor and fsync'd
// before Write returns.
//
// The file is opened for every event and closed after it. Audit events are
// rare (one per administrative change; denials are aggregated by the
// Logger), and reopening means a log rotated by rename is picked up at the
// next event, and a file whose directory has gone fails the next Write
// instead of writing into an unlinked inode. When the file is created, its
// directory is fsync'd too.
//
// With WithRotation the sink rotates the file itself: before an event that
// would take the file past the size limit, the file is renamed to
// "<path>.1" (the previous "<path>.1" to "<path>.2", and so on; the oldest
// beyond the kept count is removed), a new file is created and the event is
// written there. All of it happens inside Write, under the sink's lock (and
// the Logger's), so no event is lost or split across files, and an event
// is acknowledged only once it is in the new file, fsync'd.
type FileSink struct {
	path     string
	mode     os.FileMode
	maxSize  int64 // rotate before exceeding it; 0: never
	maxFiles int   // rotated files kept
	mu       sync.Mutex
}

// FileOption configures a FileSink.
type FileOption func(*FileSink)

// WithRotation rotates the file before an event would take it past
// maxSize bytes, keeping maxFiles rotated files (at least 1). maxSize ≤ 0
// never rotates.
func WithRotation(maxSize int64, maxFiles int) FileOption {
	return func(s *FileSink) {
		if maxSize > 0 {
			s.maxSize, s.maxFiles = maxSize, max(maxFiles, 1)
		}
	}
}

// OpenFileSink checks that path can be appended to (creating the file, mode
// 0600, if needed) and returns a sink writing to it. The directory must
// exist.
func OpenFileSink(path string, opts ...FileOption) (*FileSink, error) {
	s := &FileSink{path: path, mode: 0o600}
	for _, o := range opts {
		o(s)
	}
	f, err := s.open()
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return s, f.Close()
}

// Name returns "file:" and the path.
func (s *FileSink) Name() string { return "file:" + s.path }

// Path returns the file's path.
func (s *FileSink) Path() string { return s.path }

func (s *FileSink) open() (*os.File, error) {
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND, 0)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return f, err
	}
	return s.create()
}

// create makes the file (it must not exist) and syncs its directory.
func (s *FileSink) create() (*os.File, error) {
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, s.mode)
	if err != nil {
		return nil, err
	}
	if err := durable.SyncDir(filepath.Dir(s.path)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// rotated is the name of the n-th rotated file (1 is the newest).
func (s *FileSink) rotated(n int) string { return s.path + "." + strconv.Itoa(n) }

// rotate shifts the rotated files up by one (dropping the oldest), renames
// the current file to .1 and creates a new one. f is the open current
// file, closed here. On error the current file may have been renamed; the
// next Write creates a new one.
func (s *FileSink) rotate(f *os.File) (*os.File, error) {
	f.Close()
	if err := os.Remove(s.rotated(s.maxFiles)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("rotate: %w", err)
	}
	for n := s.maxFiles - 1; n >= 1; n-- {
		if err := os.Rename(s.rotated(n), s.rotated(n+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("rotate: %w", err)
		}
	}
	if err := os.Rename(s.path, s.rotated(1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("rotate: %w", err)
	}
	f, err := s.create()
	if err != nil {
		return nil, fmt.Errorf("rotate: %w", err)
	}
	return f, nil
}

// Write appends data and a newline and fsyncs the file, rotating it first
// if the line would take it past the size limit. If the write fails part
// way, the partial line is truncated away so the file stays one event per
// line.
func (s *FileSink) Write(_ context.Context, _ *Event, data []byte) error {
	line := make([]byte, 0, len(data)+1)
	line = append(append(line, data...), '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.open()
	if err != nil {
		return err
	}
	var size int64 = -1
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	if s.maxSize > 0 && size > 0 && size+int64(len(line)) > s.maxSize {
		if f, err = s.rotate(f); err != nil {
			return err
		}
		size = 0
	}
	if _, err := f.Write(line); err != nil {
		if size >= 0 {
			f.Truncate(size)
		}
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Close does nothing: the file is not held open between events.
func (s *FileSink) Close() error { return nil }

// WriterSink writes events as JSON lines to an io.Writer (stdout, a test
// buffer). It does not sync; use it as an optional sink.
type WriterSink struct {
	name string
	mu   sync.Mutex
	w    io.Writer
}

// NewWriterSink returns a sink writing to w under the given name.
func NewWriterSink(name string, w io.Writer) *WriterSink {
	return &WriterSink{name: name, w: w}
}

// Stdout returns a sink writing to the process's standard output.
func Stdout() *WriterSink { return NewWriterSink("stdout", os.Stdout) }

// Name returns the sink's name.
func (s *WriterSink) Name() string { return s.name }

// Write writes data and a newline in one call.
func (s *WriterSink) Write(_ context.Context, _ *Event, data []byte) error {
	line := make([]byte, 0, len(data)+1)
	line = append(append(line, data...), '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.w.Write(line)
	return err
}

// Close does nothing; the writer belongs to the caller.
func (s *WriterSink) Close() error { return nil }
