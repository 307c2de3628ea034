// Package signals finds the processes that belong to a terminal and stops
// them: SIGTERM, SIGCONT and SIGHUP first, SIGKILL after a grace period.
//
// A terminal's processes are its process session: the shell is started as a
// session leader, and everything it starts stays in that session unless it
// calls setsid itself. An interactive shell puts jobs into their own process
// groups, so signalling the group alone is not enough; the session is found by
// scanning /proc.
package signals

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// Proc is a live process seen in /proc.
type Proc struct {
	Pid   int
	Pgid  int
	Sid   int
	Start uint64 // start time, in clock ticks since boot
}

// SessionMembers returns the live processes of session sid, oldest first.
// Zombies are not live: they hold a pid but run nothing, and an orphaned
// zombie may never be reaped where PID 1 does not reap.
func SessionMembers(sid int) ([]Proc, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("scan session %d: %w", sid, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("scan session %d: %w", sid, err)
	}
	var out []Proc
	buf := make([]byte, 0, 512)
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		// getsid is one syscall; the stat file (three, and parsing) is read
		// only for members, to tell zombies and start times.
		if s, err := unix.Getsid(pid); err != nil || s != sid {
			continue
		}
		p, ok := readStat(pid, buf)
		if ok && p.Sid == sid {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Proc) int {
		if a.Start != b.Start {
			return cmpUint(a.Start, b.Start)
		}
		return a.Pid - b.Pid
	})
	return out, nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Stat reads one process. ok is false if it is gone or a zombie.
func Stat(pid int) (p Proc, ok bool) {
	return readStat(pid, make([]byte, 0, 512))
}

func readStat(pid int, buf []byte) (Proc, bool) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Proc{}, false
	}
	defer unix.Close(fd)
	buf = buf[:cap(buf)]
	n, err := unix.Read(fd, buf)
	if err != nil || n <= 0 {
		return Proc{}, false
	}
	return parseStat(pid, buf[:n])
}

// parseStat parses /proc/PID/stat: "pid (comm) state ppid pgrp session ...".
// comm may hold spaces and parentheses, so fields are counted from the last ')'.
func parseStat(pid int, b []byte) (Proc, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return Proc{}, false
	}
	f := bytes.Fields(b[i+2:])
	// f[0]=state f[1]=ppid f[2]=pgrp f[3]=session ... f[19]=starttime
	if len(f) < 20 {
		return Proc{}, false
	}
	if st := f[0][0]; st == 'Z' || st == 'X' || st == 'x' {
		return Proc{}, false
	}
	pgid, err1 := strconv.Atoi(string(f[2]))
	sid, err2 := strconv.Atoi(string(f[3]))
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Proc{}, false
	}
	return Proc{Pid: pid, Pgid: pgid, Sid: sid, Start: start}, true
}
