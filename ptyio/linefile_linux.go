package ptyio

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// lineFile returns a memory file (memfd) that holds text, at offset 0.
func lineFile(text string) (*os.File, error) {
	fd, err := unix.MemfdCreate("shellagent-line", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "memfd:shellagent-line")
	if _, err := f.WriteAt([]byte(text), 0); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}
