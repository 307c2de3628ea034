package daemon

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// flockHolder finds the flock of the file open at fd in /proc/locks, as
// "N: FLOCK  ADVISORY  WRITE PID MAJ:MIN:INO 0 EOF" (MAJ and MIN in hex;
// a process waiting for the lock is listed with "->" and skipped), and
// returns the pid it names.
func flockHolder(fd int) (pid int, held bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, false, err
	}
	dev := uint64(st.Dev) // Dev is 32 bits on some platforms
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), st.Ino)
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0, false, err
	}
	defer f.Close() // Best effort: read only.
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != id {
			continue
		}
		pid, _ := strconv.Atoi(fields[4]) // 0 where it is not a number
		return pid, true, nil
	}
	return 0, false, sc.Err()
}
