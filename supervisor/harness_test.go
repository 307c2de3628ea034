package supervisor

import (
	"fmt"
	"net"
	"os"
	"shellagent/internal/journal"
	"testing"
	"time"

	"shellagent/internal/sessiontest"
	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// The harness is internal/sessiontest's, shared with package scenario;
// this file gives it the names the tests of this package use, and what
// only they can see (inspect, await: a session's state).

func TestMain(m *testing.M) {
	if os.Getenv(listenEnv) == "1" {
		listenAndWait()
	}
	// Every Shutdown of the tests checks the promise at testloop.Bound:
	// under load the last final updates were seen to go out after 700 ms.
	shutdownSlack = testloop.Bound(shutdownSlack)
	sessiontest.Main(m)
}

// harness is one agent served over pipes to a strict test client
// (sessiontest.Harness), with the fields and helpers of this package's
// tests.
type harness struct {
	*sessiontest.Harness
	t      *testing.T
	c      *acptest.Client
	sup    *Supervisor
	cwd    string
	marker string
}

func newHarness(t *testing.T, cfg Config, opts ...acptest.Option) *harness {
	t.Helper()
	marker := sessiontest.Marker()
	cfg.Env = append(os.Environ(), marker)
	if cfg.Shell == "" {
		cfg.Shell = "/bin/sh"
	}
	if cfg.Launcher == nil {
		cfg.Launcher = sessiontest.Launcher
	}
	if cfg.Log == nil {
		cfg.Log = sessiontest.Log(t)
	}
	sup := New(cfg)
	return wrap(sessiontest.New(t, sup, cfg.Log, marker, opts...), sup)
}

func wrap(h *sessiontest.Harness, sup *Supervisor) *harness {
	return &harness{Harness: h, t: h.T, c: h.C, sup: sup, cwd: h.Cwd, marker: h.Marker}
}

// on returns the harness's helpers for another of its clients.
func (h *harness) on(c *acptest.Client) *harness { return wrap(h.On(c), h.sup) }

func (h *harness) connect(opts ...acptest.Option) *acptest.Client { return h.Connect(opts...) }
func (h *harness) connectUninitialized(opts ...acptest.Option) *acptest.Client {
	return h.ConnectUninitialized(opts...)
}
func (h *harness) close()             { h.Close() }
func (h *harness) newSession() string { return h.NewSession() }
func (h *harness) prompt(sid, line string) int64 {
	return h.Prompt(sid, line)
}
func (h *harness) run(sid, line string) string { h.t.Helper(); return h.Run(sid, line) }
func (h *harness) update(after *acptest.Msg, sid, kind, desc string, pred func(*acptest.Msg) bool) *acptest.Msg {
	h.t.Helper()
	return h.Update(after, sid, kind, desc, pred)
}
func (h *harness) never(sid, what string, pred func(*acptest.Msg) bool) {
	h.t.Helper()
	h.Never(sid, what, pred)
}
func (h *harness) idle(after *acptest.Msg, sid, stop string) *acptest.Msg {
	h.t.Helper()
	return h.Idle(after, sid, stop)
}
func (h *harness) exit(after *acptest.Msg, sid, term string) *acptest.Msg {
	h.t.Helper()
	return h.Exit(after, sid, term)
}
func (h *harness) toolStatus(after *acptest.Msg, sid, call, status string) *acptest.Msg {
	h.t.Helper()
	return h.ToolStatus(after, sid, call, status)
}
func (h *harness) listed(after *acptest.Msg, sid string, want ...string) *acptest.Msg {
	h.t.Helper()
	return h.Listed(after, sid, want...)
}
func (h *harness) output(sid, term, s string) { h.t.Helper(); h.Output(sid, term, s) }
func (h *harness) callErr(method string, params any) *acptest.RPCError {
	h.t.Helper()
	return h.CallErr(method, params)
}

// busySession opens a session on h's client with a background terminal,
// term_1, that printed "bg", and a foreground command, term_2, that
// printed "fg" and waits for trigger "go" (h.release) to print "fg done".
func (h *harness) busySession() string {
	h.t.Helper()
	sid := h.newSession()
	h.run(sid, "/bg echo bg; sleep 30")
	h.output(sid, "term_1", "bg")
	h.run(sid, "echo fg; "+trigger("go")+"; echo fg done")
	h.output(sid, "term_2", "fg")
	return sid
}

// inspect runs f on the state of session sid, as the supervisor's own
// goroutines do: for what no client can see (a detached session, what it
// holds).
func (h *harness) inspect(sid string, f func(st *state)) {
	h.t.Helper()
	s, err := h.sup.live.get(sid)
	if err != nil {
		h.t.Fatal(err)
	}
	s.doWait(f)
}

// await polls the state of session sid until cond holds.
func (h *harness) await(sid, what string, cond func(st *state) bool) {
	h.t.Helper()
	sessiontest.Poll(h.t, "session "+sid+": "+what, func() bool {
		ok := false
		h.inspect(sid, func(st *state) { ok = cond(st) })
		return ok
	})
}

var (
	text     = sessiontest.Text
	sameIDs  = sessiontest.SameIDs
	exitCode = sessiontest.ExitCode
	signalOf = sessiontest.SignalOf
	mustJSON = sessiontest.MustJSON
)

// freePort returns a port that nothing holds now (testloop.FreePort).
func freePort(t *testing.T) int { return testloop.FreePort(t) }

// listenEnv makes the test binary a dev server for a service of a test:
// it listens on a port of 127.0.0.1 that the system picks, says which,
// and waits to be stopped.
const listenEnv = "SUPERVISOR_TEST_LISTEN"

func listenAndWait() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Printf("listening on port %d\n", l.Addr().(*net.TCPAddr).Port)
	time.Sleep(time.Hour)
	os.Exit(0)
}

// openJournal opens the history of dir for a test, closed at its end.
func openJournal(t *testing.T, dir string) *journal.Store {
	t.Helper()
	store, err := journal.Open(journal.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}
