//go:build !linux

package ptyio

import (
	"errors"
	"fmt"
	"runtime"
)

// blockedReader is Linux's only (see input_linux.go): elsewhere nothing
// tells, cheaply, that a process is blocked reading its terminal.
func blockedReader(int, string) (InputWait, error) {
	return InputWait{}, fmt.Errorf("seeing a program wait for input on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
