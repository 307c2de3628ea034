package stack

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MaxLogSize is the most a service's log file holds before it is rotated
// once to NAME.log.1: at most twice this on disk per service.
const MaxLogSize = 10 << 20

// Project returns the name of the project in dir for STATE/logs/PROJECT:
// dir's base name, reduced to letters, digits, '_', '-' and '.', then '-'
// and the first 12 hex digits of the SHA-256 of its absolute, cleaned
// path, so that two checkouts named alike keep apart and no name can
// climb out of STATE/logs.
func Project(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("stack: project of %s: %w", dir, err)
	}
	sum := sha256.Sum256([]byte(abs))
	base := strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' {
			return c
		}
		return '_'
	}, filepath.Base(abs))
	base = strings.TrimLeft(base, ".")
	if len(base) > 40 {
		base = base[:40]
	}
	if base == "" {
		base = "root"
	}
	return base + "-" + hex.EncodeToString(sum[:6]), nil
}

// LogPath returns STATE/logs/PROJECT/NAME.log for the service name of the
// project in dir, state being the daemon's state directory.
func LogPath(state, dir, name string) (string, error) {
	if !validName(name) {
		return "", fmt.Errorf("stack: log of %q: not a service name", name)
	}
	project, err := Project(dir)
	if err != nil {
		return "", err
	}
	return filepath.Join(state, "logs", project, name+".log"), nil
}

// Log is a service's log file, capped: when a write would take it past
// its cap it is renamed to path.1 (replacing the previous one) and
// started again, so the service never holds more than twice the cap on
// disk. It appends to what an earlier run left. One goroutine at a time
// may call Write and Close.
type Log struct {
	path string
	cap  int64
	f    *os.File
	size int64
}

// OpenLogCapped opens (creating it and its directories, private to the
// user) the log file at path, capped at limit bytes (MaxLogSize if limit
// <= 0).
func OpenLogCapped(path string, limit int64) (*Log, error) {
	if limit <= 0 {
		limit = MaxLogSize
	}
	return openLog(path, limit)
}

// openLog is OpenLogCapped with limit taken as it is, for tests.
func openLog(path string, limit int64) (*Log, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("stack: open log %s: %w", path, err)
	}
	l := &Log{path: path, cap: limit}
	if err := l.open(os.O_APPEND); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Log) open(mode int) error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|mode, 0o600)
	if err != nil {
		return fmt.Errorf("stack: open log %s: %w", l.path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close() // Best effort: the Stat error is the one to report.
		return fmt.Errorf("stack: open log %s: %w", l.path, err)
	}
	l.f, l.size = f, fi.Size()
	return nil
}

// Path is the file Log writes to.
func (l *Log) Path() string { return l.path }

// Write appends p, rotating first if p would take the file past its cap
// (a p larger than the cap is written across rotations, so only its last
// part is kept whole). After an error the Log is closed.
func (l *Log) Write(p []byte) (int, error) {
	if l.f == nil {
		return 0, fmt.Errorf("stack: write log %s: %w", l.path, fs.ErrClosed)
	}
	written := 0
	for len(p) > 0 {
		if l.size > 0 && l.size+int64(len(p)) > l.cap {
			if err := l.rotate(); err != nil {
				return written, err
			}
		}
		chunk := p[:min(int64(len(p)), l.cap)]
		n, err := l.f.Write(chunk)
		written += n
		l.size += int64(n)
		if err != nil {
			l.Close() // Best effort: the write error is the one to report.
			return written, fmt.Errorf("stack: write log %s: %w", l.path, err)
		}
		p = p[n:]
	}
	return written, nil
}

// rotate renames the file to path.1 and starts a new one.
func (l *Log) rotate() error {
	err := l.f.Close()
	l.f = nil
	if err == nil {
		err = os.Rename(l.path, l.path+".1")
	}
	if err == nil {
		return l.open(os.O_TRUNC)
	}
	return fmt.Errorf("stack: rotate log %s: %w", l.path, err)
}

// Close closes the file; closing a closed Log does nothing.
func (l *Log) Close() error {
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if err != nil && !errors.Is(err, fs.ErrClosed) {
		return fmt.Errorf("stack: close log %s: %w", l.path, err)
	}
	return nil
}
