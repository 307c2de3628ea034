package contain

import (
	"maps"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The children files list every child of the agent, live or a zombie,
// whichever thread forked it, and after that thread has exited: what a
// scan of every process finds.
func TestChildListerListsEveryChild(t *testing.T) {
	l := newChildLister(os.Getpid())
	if !l.works {
		t.Skip("this kernel has no children files (CONFIG_PROC_CHILDREN): the reaper scans")
	}
	var mu sync.Mutex
	var cmds []*exec.Cmd
	run := func(argv ...string) {
		cmd := exec.Command(argv[0], argv[1:]...)
		if err := cmd.Start(); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		cmds = append(cmds, cmd)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for range 4 { // goroutines, so forks from more than one thread
		wg.Go(func() {
			run("sleep", "30")
			run("true")
			run("sleep", "30")
		})
	}
	// One forked by a thread that then exits (a goroutine that ends
	// locked to its thread): the kernel hands the child to another thread.
	wg.Go(func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		run("sleep", "30")
	})
	wg.Wait()
	t.Cleanup(func() {
		for _, cmd := range cmds {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	want := make(map[int]byte) // pid: 'Z' for a zombie, 'L' live
	for _, cmd := range cmds {
		state := byte('L')
		if cmd.Args[0] == "true" {
			state = 'Z'
			waitZombie(t, cmd.Process.Pid)
		}
		want[cmd.Process.Pid] = state
	}
	procs, ok := l.list()
	if !ok {
		t.Fatal("list: no listing could be trusted, with no child reaped meanwhile")
	}
	got := states(procs, os.Getpid())
	if !maps.Equal(got, want) {
		t.Errorf("listed %v, want %v", got, want)
	}
	all, err := scanProcs()
	if err != nil {
		t.Fatal(err)
	}
	if scanned := states(all, os.Getpid()); !maps.Equal(got, scanned) {
		t.Errorf("listed %v, a scan found %v", got, scanned)
	}
}

// states maps each child of parent among procs to 'Z' if a zombie, else 'L'.
func states(procs []proc, parent int) map[int]byte {
	out := make(map[int]byte)
	for _, p := range procs {
		if p.ppid != parent {
			continue
		}
		out[p.pid] = 'L'
		if p.zombie() {
			out[p.pid] = 'Z'
		}
	}
	return out
}

// waitZombie waits until process pid is a zombie.
func waitZombie(t *testing.T, pid int) {
	t.Helper()
	if !becomesZombie(pid) {
		t.Fatalf("process %d did not become a zombie", pid)
	}
}

// becomesZombie reports whether process pid is a zombie within 10 s.
func becomesZombie(pid int) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if p, ok := readProc(pid); ok && p.zombie() {
			return true
		}
	}
	return false
}

// The reaper's pass at a SIGCHLD reads the agent's children, not every
// process of the machine: an orphan is reaped with no scan.
func TestReaperPassMakesNoScan(t *testing.T) {
	if !newChildLister(os.Getpid()).works {
		t.Skip("this kernel has no children files (CONFIG_PROC_CHILDREN): the reaper scans")
	}
	c := openMode(t, Subreaper)
	scans := &c.m.(*markerMode).scans
	before := scansMade(scans)
	// The sleep is orphaned when its shell exits, in the shell's session,
	// which it does not lead: the reaper's to take (rule 3).
	sh := exec.Command("/bin/sh", "-c", "sleep 0.2 & echo $!")
	sh.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := sh.Output()
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, ok := readProc(orphan); ok && time.Now().Before(deadline); _, ok = readProc(orphan) {
		time.Sleep(5 * time.Millisecond)
	}
	if p, ok := readProc(orphan); ok {
		t.Fatalf("the orphan %d is still there (state %c, parent %d)", orphan, p.state, p.ppid)
	}
	if n := scansMade(scans) - before; n != 0 {
		t.Errorf("the reaper made %d scans of every process, want none", n)
	}
}
