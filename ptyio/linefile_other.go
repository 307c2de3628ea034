//go:build !linux

package ptyio

import (
	"errors"
	"os"
)

// lineFile returns a file that holds text, at offset 0, and that no
// directory names: a temporary file, removed once open.
func lineFile(text string) (*os.File, error) {
	f, err := os.CreateTemp("", "shellagent-line-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	if _, err := f.WriteAt([]byte(text), 0); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}
