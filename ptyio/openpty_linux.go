package ptyio

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// OpenPTY opens a PTY pair of the given size and returns a non-blocking
// master served by the runtime poller: reads park a goroutine, not an OS
// thread, and deadlines work. Never call Fd on the master returned (it
// would make it blocking). tty is blocking and outside the poller, as a
// child's standard descriptors must be; close it once the command has
// started.
//
// It is the spawn's hot path, so it makes the fewest system calls
// (issue 26, bench/HISTORY.md round 5): the master is opened non-blocking
// and handed to the poller as it is, and the slave comes from the master
// itself (TIOCGPTPEER, Linux 4.13; by its path before), where creack/pty's
// Open, blocking and unblocking each end through os.File, took 24.
func OpenPTY(size Size) (master, tty *os.File, err error) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	s, name, err := openSlave(m, size)
	if err != nil {
		unix.Close(m) // Best effort: never handed out.
		return nil, nil, err
	}
	return os.NewFile(uintptr(m), "/dev/ptmx"), os.NewFile(uintptr(s), name), nil
}

// openSlave unlocks the slave of master m, sets the size and opens the
// slave, blocking; it returns the slave's descriptor and path.
func openSlave(m int, size Size) (int, string, error) {
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		return -1, "", fmt.Errorf("unlock pty: %w", err)
	}
	n, err := unix.IoctlGetUint32(m, unix.TIOCGPTN)
	if err != nil {
		return -1, "", fmt.Errorf("pty number: %w", err)
	}
	if err := unix.IoctlSetWinsize(m, unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols}); err != nil {
		return -1, "", fmt.Errorf("set size: %w", err)
	}
	name := "/dev/pts/" + strconv.FormatUint(uint64(n), 10)
	s, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno == 0 {
		return int(s), name, nil
	}
	if !errors.Is(errno, unix.EINVAL) && !errors.Is(errno, unix.ENOTTY) {
		return -1, "", fmt.Errorf("open %s: %w", name, errno)
	}
	// Before Linux 4.13.
	fd, err := unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", fmt.Errorf("open %s: %w", name, err)
	}
	return fd, name, nil
}
