package contain

import (
	"bytes"
	"os"
	"slices"
	"strconv"
)

// childLister lists the agent's children from its threads' children
// files (/proc/self/task/TID/children): a child's parent is the thread
// that forked it, or the one that took it as an orphan. A reap pass at
// each SIGCHLD so reads a few small files, where a scan reads every
// process of the machine (tens of milliseconds for thousands).
type childLister struct {
	self  int
	works bool // the kernel has children files (CONFIG_PROC_CHILDREN)
}

func newChildLister(self int) childLister {
	_, err := os.Stat("/proc/self/task/" + strconv.Itoa(self) + "/children")
	return childLister{self: self, works: err == nil}
}

// childListTries is how many listings list tries before it gives up.
const childListTries = 3

// list returns the agent's children, live and zombie, read after the
// call. ok is false where the kernel has no children files, or when no
// listing of childListTries could be trusted (see once): the caller then
// scans.
func (l childLister) list() ([]proc, bool) {
	if !l.works {
		return nil, false
	}
	for range childListTries {
		if procs, ok := l.once(); ok {
			return procs, true
		}
	}
	return nil, false
}

// once lists the children once. The kernel can skip a child in a
// children file when a child listed before it leaves the list during the
// read (proc(5): the file is exact only of a stopped process): reaped by
// another goroutine's Wait, or handed to another thread when its own
// exits. So a listing is trusted only if every child it names is still
// the agent's child when its stat is read, and every thread read is still
// there after it (a thread started meanwhile took no child from another).
func (l childLister) once() (procs []proc, trusted bool) {
	before, ok := threads()
	if !ok {
		return nil, false
	}
	for _, tid := range before {
		b, err := os.ReadFile("/proc/self/task/" + tid + "/children")
		if err != nil {
			return nil, false // the thread has exited
		}
		for f := range bytes.FieldsSeq(b) {
			pid, err := strconv.Atoi(string(f))
			if err != nil {
				return nil, false
			}
			p, ok := readProc(pid)
			if !ok || p.ppid != l.self {
				return nil, false // reaped since it was listed
			}
			procs = append(procs, p)
		}
	}
	after, ok := threads()
	return procs, ok && !slices.ContainsFunc(before, func(tid string) bool {
		_, found := slices.BinarySearch(after, tid)
		return !found
	})
}

// threads returns the ids of the agent's threads, sorted.
func threads() ([]string, bool) {
	d, err := os.Open("/proc/self/task")
	if err != nil {
		return nil, false
	}
	defer d.Close() // Best effort: read-only.
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, false
	}
	slices.Sort(names)
	return names, true
}
