package main

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// keepFlags gives stdin and stdout back the O_NONBLOCK they had when the
// relay began, whichever way the daemon set the open file they share
// meanwhile, and never changes it itself, however the file was made: by
// os.NewFile, as os.Stdin is (blocking or not), or non-blocking by the
// runtime itself, as os.Pipe makes it (whose File.Fd would make it
// blocking).
func TestKeepFlags(t *testing.T) {
	tests := []struct {
		name string
		open func(t *testing.T) (*os.File, int)
	}{
		{"NewFile, blocking", func(t *testing.T) (*os.File, int) { return newFilePipe(t, false) }},
		{"NewFile, non-blocking", func(t *testing.T) (*os.File, int) { return newFilePipe(t, true) }},
		{"os.Pipe", func(t *testing.T) (*os.File, int) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close(); w.Close() })
			rc, err := r.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			fd := -1
			rc.Control(func(d uintptr) { fd = int(d) })
			return r, fd
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, fd := tt.open(t)
			isNonblock := func() bool {
				fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
				if err != nil {
					t.Fatal(err)
				}
				return fl&unix.O_NONBLOCK != 0
			}
			was := isNonblock()
			restore := keepFlags(f)
			if got := isNonblock(); got != was {
				t.Errorf("O_NONBLOCK %v: keepFlags changed it to %v", was, got)
			}
			if err := unix.SetNonblock(fd, !was); err != nil { // as the daemon does
				t.Fatal(err)
			}
			restore()
			if got := isNonblock(); got != was {
				t.Errorf("O_NONBLOCK %v, the daemon set it to %v: restored to %v", was, !was, got)
			}
		})
	}
}

// newFilePipe returns the read end of a new pipe, O_NONBLOCK or not, as
// os.NewFile makes os.Stdin, and its descriptor.
func newFilePipe(t *testing.T, nonblock bool) (*os.File, int) {
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil { // Pipe2 is not on every OS this file builds for
		t.Fatal(err)
	}
	unix.CloseOnExec(p[0])
	unix.CloseOnExec(p[1])
	t.Cleanup(func() { unix.Close(p[1]) })
	if err := unix.SetNonblock(p[0], nonblock); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(p[0]), "stdin")
	t.Cleanup(func() { f.Close() })
	return f, p[0]
}
