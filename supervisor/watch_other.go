//go:build !linux

package supervisor

import (
	"errors"
	"io"
)

// watchTree is watch_linux.go's on other systems: /watch is refused, with
// why.
func watchTree(string, func(), func(error)) (io.Closer, bool, error) {
	return nil, false, errors.New("watching files needs inotify, and this build of shellagent has it on Linux only")
}
