package daemon

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// endTimeout bounds how long endProbe tries to kill what a probe left.
const endTimeout = 2 * time.Second

// endProbe kills every process of the session that the probe, process
// pid, leads, and every descendant of the probe wherever it went (a
// session of its own), until none is left alive or endTimeout has passed.
// The probe must be a child of this process that has not been reaped:
// its pid then names its session and process group, and nothing else.
// Each look finds the descendants before anything is killed, while their
// parents hold them; one that left the session after its parent had
// ended (a daemon's double fork, or a probe that exited by itself
// leaving a setsid child) is not found.
func endProbe(pid int) error {
	var left []procStat
	for deadline := time.Now().Add(endTimeout); ; time.Sleep(5 * time.Millisecond) {
		left = probeProcs(pid)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
		for _, p := range left {
			p.kill()
		}
		unix.Kill(-pid, unix.SIGKILL) // Best effort: the probe's own group at once, what it forked meanwhile too.
	}
	pids := make([]string, len(left))
	for i, p := range left {
		pids[i] = strconv.Itoa(p.pid)
	}
	return fmt.Errorf("processes left after SIGKILL: %s", strings.Join(pids, " "))
}

// procStat is what /proc/PID/stat says of a process that endProbe needs.
type procStat struct {
	pid, ppid, sid int
	start          uint64 // with the pid, it names one process
	live           bool   // not a zombie
}

// probeProcs returns the live processes of session sid and the live
// descendants of process sid, from one look at /proc.
func probeProcs(sid int) []procStat {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var all []procStat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readStat(pid); ok {
			all = append(all, p)
		}
	}
	ours := map[int]bool{sid: true}
	for grew := true; grew; {
		grew = false
		for _, p := range all {
			if !ours[p.pid] && (p.sid == sid || ours[p.ppid]) {
				ours[p.pid], grew = true, true
			}
		}
	}
	var left []procStat
	for _, p := range all {
		if ours[p.pid] && p.live {
			left = append(left, p)
		}
	}
	return left
}

// readStat reads process pid's /proc/PID/stat.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	// The fields after the command start at field 3: state, ppid, pgrp,
	// session, …, starttime (22).
	f := bytes.Fields(b[i+1:])
	if len(f) <= 22-3 {
		return procStat{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[4-3]))
	sid, err2 := strconv.Atoi(string(f[6-3]))
	start, err3 := strconv.ParseUint(string(f[22-3]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procStat{}, false
	}
	state := f[0][0]
	return procStat{pid: pid, ppid: ppid, sid: sid, start: start, live: state != 'Z' && state != 'X'}, true
}

// kill sends SIGKILL to p through a pidfd, if its pid still names it
// (its start time): never to a process that took a freed pid.
func (p procStat) kill() {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if err != nil {
		return // gone
	}
	defer unix.Close(fd) // Best effort: a pidfd.
	if now, ok := readStat(p.pid); ok && now.start == p.start {
		unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) // Best effort: the next look tells.
	}
}
