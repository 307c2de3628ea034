package ptyio

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
		return nil, nil, ptmxError(err, ptyLimits)
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

// ptyLimits is the directory where Linux tells how many PTYs are in use
// (nr) and allowed (max, and reserve: kept from the PTYs of any /dev/pts
// but the first, such as a container's).
const ptyLimits = "/proc/sys/kernel/pty"

// ptmxError is the error of an open of /dev/ptmx that failed with err.
// The kernel's ENOSPC means the system is out of PTYs: kernel/pty/max is
// reached (less kernel/pty/reserve in a container's /dev/pts), or the
// max= mount option of this /dev/pts. Then the error says so, with the
// counts read from limits, so that whoever reads it knows what to end or
// to raise.
func ptmxError(err error, limits string) error {
	if !errors.Is(err, unix.ENOSPC) {
		return fmt.Errorf("open /dev/ptmx: %w", err)
	}
	read := func(name string) (int, error) {
		b, err := os.ReadFile(filepath.Join(limits, name))
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(strings.TrimSpace(string(b)))
	}
	nr, errNr := read("nr")
	limit, errMax := read("max")
	reserve, errReserve := read("reserve")
	if err := errors.Join(errNr, errMax, errReserve); err != nil {
		return fmt.Errorf("open /dev/ptmx: %w: the system is out of PTYs (kernel/pty/max reached, or the max= mount option of /dev/pts; the count is unknown: %v)", unix.ENOSPC, err)
	}
	// The kernel refuses a PTY when the count with it would reach
	// kernel/pty/max, less kernel/pty/reserve outside the first /dev/pts:
	// with fewer in use, it was this /dev/pts's own max=.
	if nr+1 < limit-reserve {
		return fmt.Errorf("open /dev/ptmx: %w: out of PTYs: this /dev/pts allows no more (its devpts max= mount option), with %d in use on the system (%s/nr) of kernel/pty/max %d; end some terminals", unix.ENOSPC, nr, limits, limit)
	}
	return fmt.Errorf("open /dev/ptmx: %w: the system is out of PTYs: %d in use (%s/nr) of kernel/pty/max %d (%d fewer in a container's /dev/pts: kernel/pty/reserve); end some terminals, or raise %s/max", unix.ENOSPC, nr, limits, limit, reserve, limits)
}
