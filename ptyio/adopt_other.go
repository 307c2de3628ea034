//go:build !linux

package ptyio

import (
	"errors"
	"fmt"
	"io"
)

// Adopt refuses: an upgrade in place needs Linux.
func (l Local) Adopt(h Handed, _ io.Writer, _ Events) (Process, error) {
	return nil, fmt.Errorf("adopt the terminal of %d: %w", h.Pid, errors.ErrUnsupported)
}
