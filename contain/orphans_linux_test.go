package contain

import (
	"os"
	"slices"
	"testing"
	"time"

	"shellagent/internal/testloop"
)

// Orphans lists the processes of dead instances of this sweep scope, with
// their command lines and directories, but not those of the asker's own
// terminal; StopOrphans stops the terminals it is given, each terminal's
// cgroup too, leaves the instance's other terminals, and removes the
// instance's cgroup with its last terminal.
func TestOrphans(t *testing.T) {
	dead, live := deadInstance(t), liveInstance(t)
	liveMarked := startMarked(t, live, "")
	var instDir string
	var inCgroup int // in terminal 1's cgroup, without markers
	if place, err := findCgroup2(); err == nil {
		dir := place.dir(place.self + "/" + instanceDirPrefix + dead.String())
		if err := os.Mkdir(dir, 0o755); err == nil {
			instDir = dir
			t.Cleanup(func() { killTree(instDir, false, time.Second, nil, nil); removeTree(instDir) })
			for _, d := range []string{"t1", "t2", "t3"} { // t3: a spare, empty
				if err := os.Mkdir(instDir+"/"+d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			inCgroup = startMarked(t, instance{}, instDir+"/t1")
		}
	}
	in := func(term string) string {
		if instDir == "" {
			return ""
		}
		return instDir + "/t" + term
	}
	one, two := startMarkedTerm(t, dead, "1", in("1")), startMarkedTerm(t, dead, "2", in("2"))
	pids := func(os []Orphan) []int {
		var out []int
		for _, o := range os {
			out = append(out, o.Pid)
		}
		return out
	}

	got, err := Orphans()
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{min(one, two), max(one, two)}; !slices.Equal(pids(got), want) {
		t.Fatalf("Orphans() = %v, want %v (not the live instance's %d, nor %d without markers)", pids(got), want, liveMarked, inCgroup)
	}
	wd, _ := os.Getwd()
	for _, o := range got {
		if o.Command != "sleep 300" || o.Dir != wd {
			t.Errorf("orphan %d: command %q in %q, want sleep 300 in %q", o.Pid, o.Command, o.Dir, wd)
		}
	}
	t.Setenv(InstanceEnv, dead.String())
	t.Setenv(TerminalEnv, "2")
	if got, err := Orphans(); err != nil || !slices.Equal(pids(got), []int{one}) {
		t.Errorf("Orphans() asked from terminal 2 = %v, %v; want terminal 1's %d alone", pids(got), err, one)
	}
	os.Unsetenv(InstanceEnv)
	os.Unsetenv(TerminalEnv)

	ones := slices.DeleteFunc(got, func(o Orphan) bool { return o.Pid != one })
	if err := StopOrphans(ones); err != nil {
		t.Fatal(err)
	}
	// SIGKILL's end is the kernel's, with no promise of when: a loaded
	// machine may take more than a moment.
	for deadline := time.Now().Add(testloop.Wait); running(one) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if running(one) || inCgroup != 0 && running(inCgroup) {
		t.Errorf("after StopOrphans of terminal 1: its processes running: %v, %v", running(one), inCgroup != 0 && running(inCgroup))
	}
	if !running(two) || !running(liveMarked) {
		t.Errorf("StopOrphans of terminal 1 stopped another terminal (%v) or a live instance's (%v)", !running(two), !running(liveMarked))
	}
	if instDir != "" {
		if _, err := os.Stat(in("1")); !os.IsNotExist(err) {
			t.Errorf("terminal 1's cgroup after StopOrphans: %v, want it removed", err)
		}
		if _, err := os.Stat(in("2")); err != nil {
			t.Errorf("terminal 2's cgroup after StopOrphans of terminal 1: %v", err)
		}
	}

	left, err := Orphans()
	if err != nil || !slices.Equal(pids(left), []int{two}) {
		t.Fatalf("Orphans() after terminal 1 stopped = %v, %v; want %d", pids(left), err, two)
	}
	if err := StopOrphans(left); err != nil {
		t.Fatal(err)
	}
	if instDir != "" {
		if _, err := os.Stat(instDir); !os.IsNotExist(err) {
			t.Errorf("the instance's cgroup after its last terminal stopped: %v, want it removed (its spare too)", err)
		}
	}
	if running(two) {
		t.Errorf("terminal 2's process %d survived StopOrphans", two)
	}
}
