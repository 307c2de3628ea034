package stack

import (
	"bufio"
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// listeners returns the inodes of the TCP sockets listening on port.
func listeners(port int) []uint64 {
	var inodes []uint64
	for inode, p := range listening() {
		if p == port {
			inodes = append(inodes, inode)
		}
	}
	return inodes
}

// listening returns the TCP sockets in LISTEN state, inode to port, from
// /proc/net/tcp and /proc/net/tcp6 (this network namespace, every user).
func listening() map[uint64]int {
	socks := make(map[uint64]int)
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		listeningIn(name, socks)
	}
	return socks
}

// listeningIn adds the listening sockets of one /proc/net/tcp table to
// socks. Its lines are "sl local rem st tx:rx tr:when retrnsmt uid timeout
// inode …", addresses as HEXADDR:HEXPORT, LISTEN as state 0A.
func listeningIn(name string, socks map[uint64]int) {
	f, err := os.Open(name)
	if err != nil {
		return // Best effort: no /proc, no IPv6.
	}
	defer f.Close()           // Best effort: read only.
	sc := bufio.NewScanner(f) // Lines are about 150 bytes.
	sc.Scan()                 // The header.
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "0A" {
			continue
		}
		_, hexPort, ok := strings.Cut(fields[1], ":")
		port, err := strconv.ParseUint(hexPort, 16, 16)
		if !ok || err != nil {
			continue
		}
		if inode, err := strconv.ParseUint(fields[9], 10, 64); err == nil && inode != 0 {
			socks[inode] = int(port)
		}
	}
}

// ListenPorts returns the TCP ports on which one of the processes pids
// holds a listening socket, sorted, each once, and true: what a service's
// run listens on. A process that is gone, or whose descriptors cannot be
// read, adds none. Where the system does not tell (not Linux), it returns
// nil, false.
func ListenPorts(pids []int) ([]int, bool) {
	socks := listening()
	var ports []int
	for _, pid := range pids {
		for _, inode := range sockets(pid) {
			if port, listens := socks[inode]; listens {
				ports = append(ports, port)
			}
		}
	}
	slices.Sort(ports)
	return slices.Compact(ports), true
}

// holder finds the processes with one of the sockets open, scanning
// /proc/PID/fd (only this user's processes can be read, unless root), and
// returns the pid and command line (arguments joined by spaces) of the one
// whose parent does not hold it too, the lowest such pid if there are
// several: a server's first process, not the workers it shares the
// socket with, nor a child it forked a moment ago that has not yet exec'd
// (and so still holds its descriptors).
func holder(inodes []uint64) (int, string) {
	if len(inodes) == 0 {
		return 0, ""
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, ""
	}
	holders := make(map[int]int) // pid: its parent's
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || !slices.ContainsFunc(sockets(pid), func(i uint64) bool { return slices.Contains(inodes, i) }) {
			continue
		}
		holders[pid] = parent(pid)
	}
	first := 0
	for pid, ppid := range holders {
		if _, held := holders[ppid]; !held && (first == 0 || pid < first) {
			first = pid
		}
	}
	if first == 0 {
		return 0, ""
	}
	return first, cmdline(first)
}

// parent returns the pid of pid's parent, from /proc/PID/stat ("pid
// (comm) state ppid …", where comm may hold spaces and parentheses), or 0.
func parent(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// sockets returns the inodes of the sockets process pid has open, from
// the links of /proc/PID/fd ("socket:[INODE]"); none for a process that
// is gone or another user's.
func sockets(pid int) []uint64 {
	fdDir := "/proc/" + strconv.Itoa(pid) + "/fd"
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return nil
	}
	var inodes []uint64
	for _, fd := range fds {
		target, err := os.Readlink(fdDir + "/" + fd.Name())
		inode, ok := strings.CutPrefix(target, "socket:[")
		if err != nil || !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSuffix(inode, "]"), 10, 64); err == nil {
			inodes = append(inodes, n)
		}
	}
	return inodes
}

// cmdline returns the command line of pid, its arguments joined by
// spaces, or "" when it cannot be read.
func cmdline(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return ""
	}
	return string(bytes.Join(bytes.FieldsFunc(b, func(r rune) bool { return r == 0 }), []byte(" ")))
}

// holdForks keeps this process from forking until release is called: a
// child forked meanwhile would hold a copy of every descriptor open then
// until its exec (syscall.ForkLock, which every fork of the os/exec and
// syscall packages takes). On Linux the net package opens its sockets
// close-on-exec without taking the lock, so a listen may run under it.
func holdForks() (release func()) {
	syscall.ForkLock.RLock()
	return syscall.ForkLock.RUnlock
}
