//go:build !linux

package fswatch

import (
	"errors"
	"io"
)

// Watch is watch_linux.go's on other systems: watching is refused, with
// why.
func Watch(string, func(), func(error)) (io.Closer, bool, error) {
	return nil, false, errors.New("watching files needs inotify, and this build of shellagent has it on Linux only")
}
