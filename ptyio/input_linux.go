package ptyio

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxLook bounds the processes of a foreground group that blockedReader
// looks at.
const maxLook = 64

// blockedReader finds a process of the foreground process group pgid
// that is blocked reading the terminal whose slave is tty. It looks at
// the group's leader and, through /proc/PID/task/PID/children, at its
// descendants in the group (a shell waiting for the program it started):
// a process in state S, sleeping where a terminal read sleeps (wchan
// wait_woken, or n_tty_read on older kernels), in read(2) or readv(2) of
// a descriptor that is tty or /dev/tty. The wchan alone would also match
// a read of a socket, hence the look at the call and its descriptor.
//
// It costs, per process of the group, a read of its stat and children
// files, and for a sleeping one its wchan, syscall and one readlink. A
// process whose files cannot be read (not ours to trace, or gone) counts
// as not reading. Programs that wait in poll, select or epoll (vim, node)
// are not seen: nothing tells their wait for the terminal from any other.
func blockedReader(pgid int, tty string) (InputWait, error) {
	queue := []int{pgid}
	for i := 0; i < len(queue) && i < maxLook; i++ {
		pid := queue[i]
		dir := "/proc/" + strconv.Itoa(pid)
		state, group, ok := statOf(dir)
		if !ok || group != pgid {
			continue
		}
		if state == 'S' && readsTerminal(dir, tty) {
			return InputWait{Pid: pid, Reads: readCalls(dir)}, nil
		}
		children, err := os.ReadFile(dir + "/task/" + strconv.Itoa(pid) + "/children")
		if err != nil {
			continue
		}
		for f := range bytes.FieldsSeq(children) {
			if child, err := strconv.Atoi(string(f)); err == nil {
				queue = append(queue, child)
			}
		}
	}
	return InputWait{}, nil
}

// statOf returns the state and process group of the process at dir.
func statOf(dir string) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) state ppid pgrp ...": comm may hold anything, even ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pgrp, err = strconv.Atoi(string(f[2]))
	return f[0][0], pgrp, err == nil
}

// readsTerminal reports whether the sleeping process at dir is blocked in
// a read of the terminal tty.
func readsTerminal(dir, tty string) bool {
	wchan, err := os.ReadFile(dir + "/wchan")
	if err != nil || string(wchan) != "wait_woken" && string(wchan) != "n_tty_read" {
		return false
	}
	call, err := os.ReadFile(dir + "/syscall") // "NR arg0 arg1 ...", arg0 in hex
	if err != nil {
		return false
	}
	f := bytes.Fields(call)
	if len(f) < 2 {
		return false // "running", or a kernel thread
	}
	nr, err1 := strconv.Atoi(string(f[0]))
	fd, err2 := strconv.ParseInt(string(bytes.TrimPrefix(f[1], []byte("0x"))), 16, 32)
	if err1 != nil || err2 != nil || nr != unix.SYS_READ && nr != unix.SYS_READV {
		return false
	}
	link, err := os.Readlink(dir + "/fd/" + strconv.FormatInt(fd, 10))
	return err == nil && (link == tty || link == "/dev/tty")
}

// readCalls returns the read calls the process at dir has completed
// (syscr in its io file), or -1.
func readCalls(dir string) int64 {
	b, err := os.ReadFile(dir + "/io")
	if err != nil {
		return -1
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("syscr: ")); ok {
			if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}
