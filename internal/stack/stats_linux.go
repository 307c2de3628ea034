package stack

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// clockTick is the unit of the times in /proc/PID/stat: USER_HZ, which
// the kernel fixes at 100 for userspace on every architecture Go runs on.
const clockTick = time.Second / 100

// TreeStats sums, over the processes of a service's tree, the resident
// memory (RSS; pages shared between them count once per process, as ps
// counts them) and the CPU time, user and system, including the children
// they have reaped. A pid that is gone or unreadable adds nothing; where
// /proc is not (not Linux) it is 0, 0.
func TreeStats(pids []int) (rssBytes int64, cpu time.Duration) {
	page := int64(os.Getpagesize())
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid)
		if pages, ok := residentPages(dir + "/statm"); ok {
			rssBytes += pages * page
		}
		if ticks, ok := cpuTicks(dir + "/stat"); ok {
			cpu += time.Duration(ticks) * clockTick
		}
	}
	return rssBytes, cpu
}

// residentPages reads the second field of /proc/PID/statm.
func residentPages(name string) (int64, bool) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(f[1]), 10, 64)
	return n, err == nil
}

// cpuTicks reads utime, stime, cutime and cstime (fields 14 to 17) of
// /proc/PID/stat, counting fields after the command name's last ')',
// since the name may hold spaces and parentheses.
func cpuTicks(name string) (int64, bool) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3, the state.
	if len(f) < 15 {
		return 0, false
	}
	var sum int64
	for _, s := range f[11:15] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil {
			return 0, false
		}
		sum += n
	}
	return sum, true
}
