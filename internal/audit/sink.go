package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// FileSink appends events to a JSON-lines file: one event per line, each
// written with a single write(2) on an O_APPEND descriptor and fsync'd
// before Write returns.
//
// The file is opened for every event and closed after it. Audit events are
// rare (one per administrative change), and reopening means a log rotated
// by rename is picked up at the next event, and a file whose directory has
// gone fails the next Write instead of writing into an unlinked inode. When
// the file is created, its directory is fsync'd too.
type FileSink struct {
	path string
	mode os.FileMode
	mu   sync.Mutex
}

// OpenFileSink checks that path can be appended to (creating the file, mode
// 0600, if needed) and returns a sink writing to it. The directory must
// exist.
func OpenFileSink(path string) (*FileSink, error) {
	s := &FileSink{path: path, mode: 0o600}
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
	f, err = os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, s.mode)
	if err != nil {
		return nil, err
	}
	if err := syncDir(filepath.Dir(s.path)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Write appends data and a newline and fsyncs the file. If the write fails
// part way, the partial line is truncated away so the file stays one event
// per line.
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
