package main

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"shellagent/contain/containtest"
	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// testMode is the --containment every test agent gets (containtest.Mode).
// CI runs the containment tests once more with subreaper.
var testMode = string(containtest.Mode())

// zoo is every way a command's processes try to outlive it. Each line ends
// with "&" or ";", ready for more. Every mode must catch every case but
// those with an escapee, which Session mode may miss (docs/containment.md, "The
// modes, and what escapes each"): a process that leaves the session, drops the
// marker and whose parent exits before the agent looks.
var zoo = []struct {
	name, line string
	procs      int // processes it leaves running, at least
	// escapee is the command line of the process Session mode may miss;
	// "" where every mode must catch all.
	escapee string
}{
	// Session mode: held by its marker once its parent has exited.
	{"setsid child", "setsid sh -c 'sleep 300' &", 1, ""},
	// Session mode: held by its session, as all the cases below.
	{"double fork", "(sh -c 'sleep 300 &' &);", 1, ""},
	{"nohup", "nohup sleep 300 >/dev/null 2>&1 &", 1, ""},
	{"set -m job", "set -m; sleep 300 &", 1, ""},
	{"trap TERM HUP", `sh -c "trap '' TERM HUP; sleep 300" &`, 2, ""},
	{"stopped process", "sleep 300 & kill -STOP $!;", 1, ""},
	{"fan-out", fmt.Sprintf("for i in $(seq %d); do sleep 300 & done;", fanOut()), fanOut(), ""},
	{"fork loop", "sh -c 'while :; do sleep 300 & sleep " + forkPause() + "; done' &", 2, ""},
	// Held by cgroup mode's cgroup and by subreaper mode as the orphan
	// that holds the terminal; Session mode may miss it. The test's own
	// marker is kept, so that the test finds it whatever happens.
	{"setsid env -i, parent gone", `(setsid env -i SHELLAGENT_TEST="$SHELLAGENT_TEST" sleep 301 &);`, 1, "sleep 301"},
}

// fanOut and forkPause size the zoo's fan-out (200 processes with
// SHELLAGENT_LONG=1, 50 in the quick run) and its fork loop's pause
// between two children (10 ms long, 100 ms quick). Nine agents run the
// zoo, four at a time: the long sizes made the processes started, and
// every look at /proc (the tests', the agents'), the bulk of the quick
// run on a loaded machine.
func fanOut() int {
	if testloop.Enabled() {
		return 200
	}
	return 50
}

func forkPause() string {
	if testloop.Enabled() {
		return "0.01"
	}
	return "0.1"
}

// mayEscape reports whether process pid is a zoo case's escapee and the
// tests run in Session mode, which may miss it.
func mayEscape(pid int) bool {
	if testMode != "session" {
		return false
	}
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	cmd := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	for _, z := range zoo {
		if z.escapee != "" && cmd == z.escapee {
			return true
		}
	}
	return false
}

// killLeft kills the processes left after what, and fails the test for
// each that its mode must have ended.
func (a *agent) killLeft(left []int, after string) {
	a.t.Helper()
	var wrong []int
	for _, pid := range left {
		if mayEscape(pid) {
			a.t.Logf("process %d escaped %s, as Session mode may let it (docs/containment.md)", pid, after)
		} else {
			wrong = append(wrong, pid)
		}
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if len(wrong) > 0 {
		a.t.Errorf("%d processes survived %s: %v", len(wrong), after, describe(wrong))
	}
}

// zooProcs is how many processes the whole zoo leaves running, at least.
func zooProcs() int {
	n := 0
	for _, z := range zoo {
		n += z.procs
	}
	return n
}

const zooGrace = 500 * time.Millisecond

// others lists the live processes with the agent's marker, the agent
// itself excepted.
func (a *agent) others() []int {
	return slices.DeleteFunc(a.processes(), func(pid int) bool { return pid == a.cmd.Process.Pid })
}

// scanPause is the pause between two scans of /proc for an agent's
// processes: each reads the environment of every process on the machine,
// thousands while the zoo tests run, and four tests at a time scanning
// every 10 or 20 ms took the cores from what they measured.
const scanPause = 50 * time.Millisecond

// waitOthers waits until at least n processes of the agent run.
func (a *agent) waitOthers(n int) {
	a.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(a.others()) < n {
		if time.Now().After(deadline) {
			a.t.Fatalf("only %d processes running, want %d", len(a.others()), n)
		}
		time.Sleep(scanPause)
	}
}

// settledSleep waits until the agent's processes include a sleep and stay
// the same over two scans (setsid, sh and sleep have forked and exec'd,
// which under load takes far more than a moment), and returns them.
func (a *agent) settledSleep() []int {
	a.t.Helper()
	deadline := time.Now().Add(testloop.Wait)
	prev := a.others()
	for {
		time.Sleep(4 * scanPause)
		now := a.others()
		if slices.Equal(now, prev) && slices.ContainsFunc(now, func(pid int) bool {
			comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
			return string(comm) == "sleep\n"
		}) {
			return now
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("the agent's processes never settled with a sleep among them: %v", now)
		}
		prev = now
	}
}

// noSurvivors checks, within testloop.Bound(promise), that no process of
// the agent is left (the agent itself aside, and what Session mode may
// miss), and kills what is.
func (a *agent) noSurvivors(promise time.Duration, after string) {
	a.t.Helper()
	d := testloop.Bound(promise)
	deadline := time.Now().Add(d)
	left := a.others()
	mustEnd := func(pid int) bool { return !mayEscape(pid) }
	for slices.ContainsFunc(left, mustEnd) && time.Now().Before(deadline) {
		time.Sleep(scanPause)
		left = a.others()
	}
	a.killLeft(left, fmt.Sprintf("%s by %v", after, d))
}

func describe(pids []int) []string {
	var out []string
	for _, pid := range pids[:min(len(pids), 10)] {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		out = append(out, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(b), "\x00", " ")))
	}
	return out
}

// bgZoo starts every zoo member as background work in session sid and
// waits until each has said ready and all their processes run. It returns
// the terminal ids.
func (a *agent) bgZoo(sid string) []string {
	a.t.Helper()
	var terms []string
	for i, z := range zoo {
		a.prompt(sid, "/bg "+z.line+" echo ready")
		terms = append(terms, "term_"+strconv.Itoa(i+1))
	}
	for _, term := range terms {
		a.waitOutput(sid, term, "ready")
	}
	a.waitOthers(zooProcs())
	return terms
}

func (a *agent) waitOutput(sid, term, s string) {
	a.t.Helper()
	a.c.WaitFor(term+" says "+s, func(*acptest.Msg) bool {
		return strings.Contains(string(a.c.Output(sid, term)), s)
	})
}

func (a *agent) exitStatus(sid, term string) map[string]any {
	a.t.Helper()
	m := a.c.WaitFor(term+" exitStatus", func(m *acptest.Msg) bool {
		return m.SessionID == sid && m.TerminalID() == term && m.ExitStatus() != nil
	})
	return m.ExitStatus()
}

// Every way the agent can be asked to stop work, or can end, leaves no
// process of the zoo behind, within the grace plus one second.
func TestNothingLeftBehind(t *testing.T) {
	t.Run("terminal/cancel", func(t *testing.T) {
		t.Parallel()
		a := startAgent(t, "--kill-grace", zooGrace.String())
		sid := a.session()
		terms := a.bgZoo(sid)
		for i, term := range terms {
			_, err := a.c.Call("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": term})
			// A terminal whose escapee Session mode missed has ended.
			if err != nil && !(zoo[i].escapee != "" && testMode == "session" && strings.Contains(err.Message, "already exited")) {
				t.Errorf("cancel %s (%s): %v", term, zoo[i].name, err)
			}
		}
		for _, term := range terms {
			a.exitStatus(sid, term)
		}
		a.noSurvivors(zooGrace+time.Second, "terminal/cancel")
	})
	t.Run("session/cancel", func(t *testing.T) {
		t.Parallel()
		a := startAgent(t, "--kill-grace", zooGrace.String(), "--foreground-timeout", "0")
		var sids []string
		for _, z := range zoo {
			sid := a.session()
			a.prompt(sid, z.line+" echo ready; sleep 300")
			sids = append(sids, sid)
		}
		for _, sid := range sids {
			a.waitOutput(sid, "term_1", "ready")
		}
		a.waitOthers(zooProcs() + len(zoo))
		for _, sid := range sids {
			a.c.Notify("session/cancel", map[string]string{"sessionId": sid})
		}
		for _, sid := range sids {
			a.exitStatus(sid, "term_1")
			a.c.WaitFor("idle cancelled", func(m *acptest.Msg) bool {
				return m.SessionID == sid && m.State() == "idle" && m.StopReason() == "cancelled"
			})
		}
		a.noSurvivors(zooGrace+time.Second, "session/cancel")
	})
	t.Run("session/close", func(t *testing.T) {
		t.Parallel()
		a := startAgent(t, "--kill-grace", zooGrace.String())
		sid := a.session()
		a.bgZoo(sid)
		a.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
		a.noSurvivors(zooGrace+time.Second, "session/close")
	})
	ends := []struct {
		name string
		end  func(a *agent, stdout *os.File)
	}{
		{"stdin EOF", func(a *agent, _ *os.File) { a.c.Close() }},
		{"SIGTERM", func(a *agent, _ *os.File) { a.cmd.Process.Signal(syscall.SIGTERM) }},
		{"SIGINT", func(a *agent, _ *os.File) { a.cmd.Process.Signal(syscall.SIGINT) }},
		{"SIGHUP", func(a *agent, _ *os.File) { a.cmd.Process.Signal(syscall.SIGHUP) }},
		{"SIGQUIT", func(a *agent, _ *os.File) { a.cmd.Process.Signal(syscall.SIGQUIT) }},
		{"closed stdout", func(_ *agent, stdout *os.File) { stdout.Close() }},
	}
	for _, tt := range ends {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, stdout := startAgentOwnStdout(t, "--kill-grace", zooGrace.String())
			sid := a.session()
			a.bgZoo(sid)
			tt.end(a, stdout)
			a.exitWithin(zooGrace + time.Second)
		})
	}
}

// startAgentOwnStdout is startAgent with the reading end of the agent's
// stdout returned, so that a test can close it as a crashed client does.
func startAgentOwnStdout(t *testing.T, args ...string) (*agent, *os.File) {
	t.Helper()
	marker := "SHELLAGENT_TEST=" + rand.Text()
	cmd := exec.Command(binary, append([]string{"--shell", "/bin/sh", "--containment", testMode}, args...)...)
	cmd.Env = append(os.Environ(), marker, noRaceExitDelay, ownState(t))
	cmd.Stderr = testWriter{t}
	cmd.WaitDelay = 2 * time.Second
	stdin, pr := startOwnStdout(t, cmd)
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	c := acptest.New(t, pr, stdin)
	a := &agent{t: t, c: c, cmd: cmd, marker: marker, cwd: t.TempDir()}
	c.MustCall("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "test", "version": "1"}}, nil)
	return a, pr
}

// The initialize response names the containment mode in use.
func TestInitializeReportsContainment(t *testing.T) {
	a, _ := startAgentOwnStdout(t)
	m := a.c.WaitFor("initialize response", func(m *acptest.Msg) bool { return m.IsResponse() })
	var res struct {
		Meta struct {
			Shellagent struct {
				Containment string `json:"containment"`
			} `json:"shellagent"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil {
		t.Fatal(err)
	}
	want := testMode
	if want == "auto" {
		want = autoMode(t)
	}
	if got := res.Meta.Shellagent.Containment; got != want {
		t.Errorf("_meta.shellagent.containment = %q, want %q", got, want)
	}
}

// autoMode is what auto chooses on this machine: cgroup where a cgroup can
// be created below this process's (as root in a VM, or in a delegated
// systemd session).
func autoMode(t *testing.T) string {
	out, err := exec.Command(binary, "--containment", "cgroup").CombinedOutput()
	if strings.Contains(string(out), "cgroup containment is not available") {
		return "subreaper"
	}
	if err != nil {
		t.Fatalf("--containment cgroup: %v\n%s", err, out)
	}
	return "cgroup"
}

// --containment cgroup fails at startup, with the reason, where cgroups are
// not available; a bad value is a usage error.
func TestContainmentFlag(t *testing.T) {
	out, err := exec.Command(binary, "--containment", "jail").CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "--containment") {
		t.Errorf("--containment jail: exit %d, %q", code, out)
	}
	if autoMode(t) == "subreaper" {
		out, err := exec.Command(binary, "--containment", "cgroup").CombinedOutput()
		if code := exitCode(err); code != 1 || !strings.Contains(string(out), "cgroup") {
			t.Errorf("--containment cgroup without cgroups: exit %d, %q", code, out)
		}
	}
}

// Where cgroups cannot be created (a read-only cgroup2 mount, as in an
// unprivileged container), --containment cgroup refuses to start and says
// why, and auto falls back to subreaper mode and reports it. On a machine
// where cgroups work, the test takes them away from the agent alone: a
// private mount namespace with the cgroup2 tree bound read-only (a
// per-mount flag, so the host's tree stays writable).
func TestContainmentWithoutCgroups(t *testing.T) {
	t.Parallel()
	if autoMode(t) == "subreaper" {
		t.Skip("cgroups are unavailable here already: TestContainmentFlag covers it")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("cgroup mode works here, and taking it away needs unshare and root")
	}
	mnt := cgroup2Mount(t)
	// sh -c SCRIPT sh MOUNT AGENT ARGS...
	const script = `mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"`
	run := func(stdin string, args ...string) (stdout, stderr string, code int) {
		cmd := exec.Command(unshare, append([]string{"--mount", "--propagation", "private", "sh", "-c", script, "sh", mnt, binary}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), exitCode(err)
	}
	if _, stderr, code := run("", "--containment", "cgroup"); code != 1 || !strings.Contains(stderr, "--containment cgroup: cgroup containment is not available") || !strings.Contains(stderr, "read-only") {
		t.Errorf("--containment cgroup without cgroups: exit %d, stderr %q", code, stderr)
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2}}` + "\n"
	if stdout, stderr, code := run(initialize, "--containment", "auto"); code != 0 || !strings.Contains(stdout, `"containment":"subreaper"`) {
		t.Errorf("--containment auto without cgroups: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if err := os.Mkdir(filepath.Join(mnt, "shellagent-test-rw"), 0o755); err != nil {
		t.Fatalf("the host's cgroup2 tree is no longer writable: %v", err)
	}
	os.Remove(filepath.Join(mnt, "shellagent-test-rw"))
}

// cgroup2Mount returns where the cgroup2 tree is mounted.
func cgroup2Mount(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if f := strings.Fields(pre); ok && len(f) >= 5 && strings.HasPrefix(post, "cgroup2 ") {
			return f[4]
		}
	}
	t.Fatal("no cgroup2 mount")
	return ""
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// An agent killed with SIGKILL leaves its work running; the next agent to
// start removes it within 2 s, and leaves a live agent's work alone.
func TestCrashSweep(t *testing.T) {
	live := startAgent(t)
	liveSid := live.session()
	live.prompt(liveSid, "/bg setsid sh -c 'sleep 300' & echo ready")
	live.waitOutput(liveSid, "term_1", "ready")
	liveProcs := live.settledSleep()

	crashed, _ := startAgentOwnStdout(t)
	sid := crashed.session()
	for _, z := range zoo[:6] { // the fan-out and the fork loop are tested above
		crashed.prompt(sid, "/bg "+z.line+" echo ready")
	}
	crashed.waitOthers(7)
	if err := crashed.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	crashed.cmd.Wait()
	// Its processes (sleep 300) run on; only a sweep ends them. (Another
	// agent that a parallel test starts now may sweep them first.)

	// The next agent sweeps at its start: within about two seconds
	// (docs/containment.md).
	startAgent(t)
	crashed.noSurvivors(testloop.Bound(2*time.Second), "the next agent's start")

	if after := live.others(); !slices.Equal(after, liveProcs) {
		t.Errorf("the live agent's processes were %v before the sweep, %v after", liveProcs, after)
	}
	live.c.MustCall("terminal/cancel", map[string]string{"sessionId": liveSid, "terminalId": "term_1"}, nil)
	if es := live.exitStatus(liveSid, "term_1"); es["signal"] != "SIGTERM" {
		t.Errorf("the live agent's terminal ended with %v", es)
	}
}

// Cancels racing natural exits: each terminal gets exactly one
// exitStatus, and it is truthful. A shell that exits 3 on its own reports
// {exitCode: 3}; one that SIGTERM reached while alive dies of it and
// reports {signal: SIGTERM}. {exitCode: 3, signal: SIGTERM} would claim a
// signal that hit only a process already exiting. The quick run races
// 240 commands, SHELLAGENT_LONG=1 1,000.
func TestCancelRacingExit(t *testing.T) {
	sessions, each := 4, 60
	if testing.Short() {
		t.Skip("hundreds of commands")
	}
	if testloop.Enabled() {
		each = 250
	}
	t.Parallel() // no bound on time: the statuses only must be right
	a := startAgent(t, "--kill-grace", "30s")
	counts := make(map[string]int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range sessions {
		sid := a.session()
		wg.Go(func() {
			for i := range each {
				// A busy loop of 0 to 98,010 steps (0 to 0.1 s on a quiet
				// machine; most of them short, the steps growing as the
				// square) spreads the natural exit around the moment the
				// cancel arrives, on a quiet machine and on a loaded one,
				// where the cancel comes later (beside two busy loops under
				// -race, after every exit of a loop of 10,000 steps at
				// most).
				line := fmt.Sprintf("/bg i=0; while [ $i -lt %d ]; do i=$((i+1)); done; exit 3", (i%100)*(i%100)*10)
				a.prompt(sid, line)
				term := "term_" + strconv.Itoa(i+1)
				_, err := a.c.Call("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": term})
				if err != nil && !strings.Contains(err.Message, "already exited") {
					t.Errorf("cancel %s: %v", term, err)
				}
			}
			for i := range each {
				term := "term_" + strconv.Itoa(i+1)
				es := a.exitStatus(sid, term)
				var got string
				switch {
				case es["signal"] == "SIGTERM" && es["exitCode"] == nil:
					got = "SIGTERM"
				case es["signal"] == nil && es["exitCode"] == float64(3):
					got = "exit 3"
				default:
					t.Errorf("%s %s: exitStatus %v", sid, term, es)
				}
				mu.Lock()
				counts[got]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("outcomes: %v", counts)
	if counts["SIGTERM"] == 0 || counts["exit 3"] == 0 {
		t.Errorf("outcomes %v: the cancels never raced the exits", counts)
	}
	// Exactly one exitStatus per terminal.
	seen := make(map[string]int)
	for _, m := range a.c.Transcript() {
		if m.ExitStatus() != nil {
			seen[m.SessionID+"/"+m.TerminalID()]++
		}
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s: %d exitStatus", k, n)
		}
	}
	if len(seen) != sessions*each {
		t.Errorf("%d terminals reported an exit, want %d", len(seen), sessions*each)
	}
}

// A cancel that comes while the command holds SIGTERM, as dash does from
// just before it forks a command until that command has exec'd, reaches
// what the command forks meanwhile: the terminal ends by SIGTERM, long
// before its kill grace of an hour, and leaves no process behind.
// contain's TestSignalReachesWhatAHolderForks tests the rule in each mode;
// this tests it through the agent. The holder says whether the cancel came
// while it held the signal; an attempt that came too late (a loaded
// machine) is made again, up to five times. The hold is short (300 ms) so
// that the holder, once it lets the signal in, has 700 ms of the stop's
// second of waiting (holdWait) to be scheduled, as in contain's test.
func TestCancelReachesWhatAHolderForks(t *testing.T) {
	t.Parallel()
	const holder = `/bg exec perl -e '
		use POSIX;
		$| = 1;
		my $term = POSIX::SigSet->new(SIGTERM);
		sigprocmask(SIG_BLOCK, $term);
		print "holding\n";
		select(undef, undef, undef, 0.3);
		if (fork() == 0) { sigprocmask(SIG_UNBLOCK, $term); exec "sleep", "300" }
		my $pending = POSIX::SigSet->new;
		sigpending($pending);
		print $pending->ismember(SIGTERM) ? "held\n" : "missed\n";
		sigprocmask(SIG_UNBLOCK, $term);
		sleep 300'`
	a := startAgent(t, "--kill-grace", "1h")
	sid := a.session()
	for i := 1; ; i++ {
		term := "term_" + strconv.Itoa(i)
		a.prompt(sid, holder)
		a.waitOutput(sid, term, "holding")
		a.c.MustCall("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": term}, nil)
		if es := a.exitStatus(sid, term); es["signal"] != "SIGTERM" {
			t.Fatalf("%s: exitStatus %v, want signal SIGTERM", term, es)
		}
		a.noSurvivors(time.Second, "the cancel of "+term)
		out := string(a.c.Output(sid, term))
		switch {
		case strings.Contains(out, "held"):
			return
		case !strings.Contains(out, "missed"):
			t.Fatalf("%s: output %q, want the holder to say held or missed", term, out)
		case i == 5:
			t.Fatalf("five cancels came after the holder had forked")
		}
		t.Logf("%s: the cancel came after the fork; again", term)
	}
}

// Everything a command writes before its last process ends is delivered,
// however busy the machine: 8 commands at once, each ending with a setsid
// child that still writes to the terminal after the shell has returned.
func TestOutputAtExitIsComplete(t *testing.T) {
	const n, lines = 8, 50000
	a := startAgent(t)
	sid := a.session()
	for range n {
		a.prompt(sid, fmt.Sprintf("/bg setsid sh -c 'seq 1 %d; echo END' & exit 0", lines))
	}
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		want.WriteString(strconv.Itoa(i) + "\r\n")
	}
	want.WriteString("END\r\n")
	for i := 1; i <= n; i++ {
		term := "term_" + strconv.Itoa(i)
		a.exitStatus(sid, term)
		if got := string(a.c.Output(sid, term)); got != want.String() {
			t.Errorf("%s: %d bytes, want %d; ends %q", term, len(got), want.Len(), got[max(0, len(got)-20):])
		}
	}
}

// Shutdown stops each session's work with that session's kill_grace, not
// the flag's: on stdin EOF, a command that ignores SIGTERM in a session
// with kill_grace 3s is killed after 3 s, one in a session with 1s after
// 1 s, and the agent exits within the longest grace plus one second.
func TestShutdownHonoursEachSessionsKillGrace(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--kill-grace", "1s")
	graces := map[string]time.Duration{}
	var sids []string
	for _, grace := range []string{"3s", "1s"} {
		sid := a.session()
		a.c.MustCall("session/set_config_option", map[string]any{"sessionId": sid, "configId": "kill_grace", "type": "id", "value": grace}, nil)
		a.prompt(sid, "/bg trap '' TERM HUP; echo ready; sleep 300")
		a.waitOutput(sid, "term_1", "ready")
		graces[sid], _ = time.ParseDuration(grace)
		sids = append(sids, sid)
	}
	eof := time.Now()
	a.c.Close() // stdin EOF; the client reads on to the end
	a.exitWithin(3*time.Second + time.Second)
	// Killed no sooner than its grace, within testloop.Bound of its grace
	// plus a second, and the 1 s session's command before the 3 s one's.
	var killed []time.Time
	for _, sid := range sids {
		m := a.c.WaitFor("exit", func(m *acptest.Msg) bool { return m.SessionID == sid && m.ExitStatus() != nil })
		if m.ExitStatus()["signal"] != "SIGKILL" {
			t.Errorf("%s: exitStatus %v", sid, m.ExitStatus())
		}
		if took := m.At.Sub(eof); took < graces[sid]-100*time.Millisecond || took > testloop.Bound(graces[sid]+time.Second) {
			t.Errorf("session with kill_grace %v: killed after %v", graces[sid], took)
		}
		killed = append(killed, m.At)
	}
	if !killed[1].Before(killed[0]) {
		t.Errorf("the command of the session with kill_grace 1s was killed %v after the one with 3s", killed[1].Sub(killed[0]))
	}
}

// A second stop signal during the shutdown does not kill the agent before
// it has stopped its commands (the default action of a signal no longer
// caught): it skips the rest of the kill grace. With a 30 s grace and a
// command that ignores SIGTERM, SIGTERM after stdin EOF ends everything
// at once, and the agent still exits 0 with nothing left behind. The
// command's exitStatus says SIGKILL: the last signal the agent sent it.
func TestSecondSignalDuringShutdown(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--kill-grace", "30s")
	sid := a.session()
	a.prompt(sid, "/bg trap '' TERM HUP; echo ready; sleep 300")
	a.waitOutput(sid, "term_1", "ready")
	closed := make(chan struct{})
	go func() {
		a.c.Close() // stdin EOF: the shutdown starts, with a 30 s grace ahead
		close(closed)
	}()
	time.Sleep(500 * time.Millisecond) // the SIGTERM round is sent and ignored
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	a.exitWithin(5 * time.Second)
	<-closed
	if sig := a.exitStatus(sid, "term_1")["signal"]; sig != "SIGKILL" {
		t.Errorf("the command killed by the second signal ended with signal %v, want SIGKILL", sig)
	}
}

// Commands get the PTY and no other descriptor of the agent's, and the
// environment markers.
func TestCloseOnExecAndEnvironment(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	// w is fd 3 in the agent, inherited without close-on-exec.
	cmd, stdin, stdout, marker := startPiped(t, binary, []string{"--shell", "/bin/sh", "--containment", testMode}, w)
	c := acptest.New(t, stdout, stdin)
	a := &agent{t: t, c: c, cmd: cmd, marker: marker, cwd: t.TempDir()}
	c.MustCall("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "test", "version": "1"}}, nil)
	sid := a.session()
	// ls holds the directory it lists as its lowest free descriptor: 3,
	// unless the agent's fd 3 was inherited.
	a.prompt(sid, `echo fds $(ls /proc/self/fd | tr '\n' ' ') instance=${SHELLAGENT_INSTANCE:+set} terminal=$SHELLAGENT_TERMINAL`)
	a.exitStatus(sid, "term_1")
	if got := string(a.c.Output(sid, "term_1")); got != "fds 0 1 2 3 instance=set terminal=1\r\n" {
		t.Errorf("command saw %q", got)
	}
	c.Close()
	a.exitWithin(5 * time.Second)
}

// In a pid namespace whose /proc is another namespace's (unshare --pid
// --fork without --mount-proc) every pid in /proc names another process,
// or none: the agent refuses to start, in every mode, and says what to do.
// With a /proc of its own it works as anywhere: a command ends with its
// status, /ps lists its processes, a cancel reaches them, and, as its
// namespace's init, it reaps the orphans there.
func TestPidNamespace(t *testing.T) {
	t.Parallel()
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs unshare and root")
	}
	if out, err := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "true").CombinedOutput(); err != nil {
		t.Skipf("unshare --pid is not permitted here: %v: %s", err, out)
	}
	for _, mode := range []string{"auto", "cgroup", "subreaper", "session"} {
		out, err := exec.Command(unshare, "--pid", "--fork", binary, "--containment", mode).CombinedOutput()
		want := "--containment " + mode + ": /proc is not of this process's pid namespace"
		if code := exitCode(err); code != 1 || !strings.Contains(string(out), want) || !strings.Contains(string(out), "--mount-proc") {
			t.Errorf("--containment %s without --mount-proc: exit %d, %q", mode, code, out)
		}
	}

	marker := "SHELLAGENT_TEST=" + rand.Text()
	args := []string{"--pid", "--fork", "--mount-proc", binary, "--shell", "/bin/sh", "--containment", testMode}
	c, cmd := acptest.StartBinary(t, unshare, args, []string{marker, noRaceExitDelay})
	a := &agent{t: t, c: c, cmd: cmd, marker: marker, cwd: t.TempDir()}
	c.MustCall("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "test", "version": "1"}}, nil)
	sid := a.session()
	a.prompt(sid, "echo hi")
	if es := a.exitStatus(sid, "term_1"); es["exitCode"] != float64(0) {
		t.Errorf("echo: exitStatus %v", es)
	}
	if got := string(a.c.Output(sid, "term_1")); got != "hi\r\n" {
		t.Errorf("echo: output %q", got)
	}

	a.prompt(sid, "/bg for i in $(seq 20); do (true &); (setsid true &); done; echo ready; exec sleep 300")
	a.waitOutput(sid, "term_2", "ready")
	// The orphans may still run for a moment: until then /ps lists them
	// too, and never a process of another namespace.
	deadline := time.Now().Add(10 * time.Second)
	var last *acptest.Msg
	for {
		a.prompt(sid, "/ps")
		last = a.c.WaitAfter(last, "the /ps answer", func(m *acptest.Msg) bool {
			return m.Kind == "agent_message" && strings.Contains(m.Text(), "term_2")
		})
		ps := last.Text()
		listed := strings.Split(ps, ", pid ")[1:]
		for _, p := range listed {
			// sleep, an orphan (true, setsid true) or a subshell; in
			// brackets (its name) once it is on its way out, or for a
			// moment in the middle of an exec, when the command line is
			// empty and the name may already be the new one ([sleep]).
			_, cmd, _ := strings.Cut(p, " ")
			switch cmd = strings.Trim(cmd, "[]"); {
			case cmd == "sleep 300", cmd == "sleep", cmd == "true", cmd == "setsid", cmd == "setsid true", cmd == "sh", strings.HasPrefix(cmd, "/bin/sh "):
			default:
				t.Fatalf("/ps lists a process that is not the terminal's: %q", ps)
			}
		}
		if len(listed) == 1 && strings.HasSuffix(ps, " sleep 300") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/ps lists %d processes, want the one sleep 300: %q", len(listed), ps)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Every orphan has exited: the agent, its namespace's init, reaps them.
	agentPid := childOf(t, cmd.Process.Pid)
	for len(zombiesOf(agentPid)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if z := zombiesOf(agentPid); len(z) > 0 {
		t.Errorf("the agent (pid 1 of its namespace) left %d orphans unreaped: %v", len(z), z)
	}
	a.c.MustCall("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_2"}, nil)
	if es := a.exitStatus(sid, "term_2"); es["signal"] != "SIGTERM" {
		t.Errorf("cancelled: exitStatus %v", es)
	}
	a.c.Close()
	a.exitWithin(5 * time.Second)
}

// childOf returns the pid of process pid's only child, as this process's
// /proc numbers it.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	var kids []int
	for _, p := range procStats() {
		if p.ppid == pid {
			kids = append(kids, p.pid)
		}
	}
	if len(kids) != 1 {
		t.Fatalf("process %d has children %v, want one", pid, kids)
	}
	return kids[0]
}

// zombiesOf lists the zombie children of process pid.
func zombiesOf(pid int) []int {
	var out []int
	for _, p := range procStats() {
		if p.ppid == pid && p.state == "Z" {
			out = append(out, p.pid)
		}
	}
	return out
}

type procStat struct {
	pid, ppid int
	state     string
}

// procStats reads the pid, parent and state of every process in /proc.
func procStats() []procStat {
	ents, _ := os.ReadDir("/proc") // none: the callers find nothing and say so
	var out []procStat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		i := strings.LastIndexByte(string(b), ')')
		if err != nil || i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		out = append(out, procStat{pid: pid, ppid: ppid, state: f[0]})
	}
	return out
}
