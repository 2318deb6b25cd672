// Package jsonl appends JSON lines to a file durably and reads them back.
package jsonl

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Log is a JSONL file. Append is safe for concurrent use: appends are
// serialised by a mutex, each record is one write(2) on an O_APPEND
// descriptor, and the file is fsynced before Append returns.
type Log struct {
	path string
	mu   sync.Mutex
}

// New returns a Log writing to path; the file and its directory are created
// on first append.
func New(path string) *Log { return &Log{path: path} }

// Path is the file's path.
func (l *Log) Path() string { return l.path }

// Append marshals v as one line and appends it durably.
func (l *Log) Append(v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return err
	}
	_, statErr := os.Stat(l.path)
	created := errors.Is(statErr, fs.ErrNotExist)
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return fmt.Errorf("append %s: %w", l.path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", l.path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if created {
		return syncDir(filepath.Dir(l.path))
	}
	return nil
}

// syncDir makes a new directory entry durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Lines returns the file's non-empty lines; a missing file has none. It
// takes the append lock, so it never sees half a record written by this Log.
func (l *Log) Lines() ([][]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return ReadLines(l.path)
}

// ReadLines returns the non-empty lines of the JSONL file at path; a missing
// file has none.
func ReadLines(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		out = append(out, append([]byte(nil), sc.Bytes()...))
	}
	return out, sc.Err()
}
