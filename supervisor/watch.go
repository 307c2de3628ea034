package supervisor

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sync"
	"time"

	"shellagent/acp"
	"shellagent/internal/fswatch"
	"shellagent/internal/words"
)

// A watch (/watch PATH CMD) is a listed tool call, in_progress while it
// watches PATH (a directory with everything under it, or a file), with no
// process of its own. Each change, once changes have stopped for
// watchQuiet, runs CMD as new foreground work, as a recurring job's
// firing does (supervisor/jobs), with the same rule: a change that comes while
// the previous run still holds or waits for the foreground runs nothing,
// and says so once per such run. /pause makes it paused: it stops
// watching, so a change meanwhile runs nothing, then or later; /resume
// watches again, and the next change runs CMD. Cancel (tool_call/cancel,
// /stop) and close end it cancelled; a PATH that goes away ends it
// failed. It is its tool call's task; its state is the tool call's:
// callRunning, callPaused, then callDone.
//
// The operating system's side, watching a tree and reporting that
// something changed, is package internal/fswatch (inotify); here it is
// debounced (changes) and served in the session.

// watchQuiet is how long changes must stop before the watch runs CMD: an
// editor's save or a checkout is many changes in a row.
const watchQuiet = 200 * time.Millisecond

// watchSpec is what /watch watches and runs.
type watchSpec struct {
	path string // as written
	line string // the command
}

// parseWatch reads the arguments of /watch: a path (quoted as /wait's
// words are) and the rest of the line, the command.
func parseWatch(rest string) input {
	path, line, ok, err := words.Next(rest)
	switch {
	case err != nil:
		return bad("/watch: "+err.Error(), "watch")
	case !ok || path.Text == "" || line == "":
		return bad("/watch needs a path and a command", "watch")
	}
	return input{watchOf: &watchSpec{path: path.Text, line: line}}
}

// watcher is a watch. It is owned by its session's actor.
type watcher struct {
	call    *toolCall
	spec    *watchSpec
	abs     string // the path watched
	dir     bool   // it is a directory, watched with everything under it
	created time.Time
	src     *changes // the watch on abs; nil while paused, and once ended
	gen     int      // counts the watches on abs made so far; a change reported by an older one is stale
	skipped *turn    // the run during which a change was skipped and said so
	runs    int      // changes that ran CMD
}

// startWatch serves /watch: once PATH is watched (slow work: a big tree
// takes a while), the tool call is announced in_progress and cancellable,
// then listed. A PATH that cannot be watched is refused in an agent
// message, and nothing is announced.
func startWatch(st *state, spec *watchSpec) {
	abs := spec.path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(st.s.cwd, abs)
	}
	w := &watcher{spec: spec, abs: abs, created: time.Now()}
	if err := w.rewatch(st); err != nil {
		st.out.agentMessage(fmt.Sprintf("Cannot watch %s: %v.", spec.path, err))
		return
	}
	c := st.newCall(callRunning, "other", "watch "+spec.path+": "+spec.line)
	c.task, w.call = w, c
	c.input = map[string]string{"path": spec.path, "command": spec.line, "cwd": st.s.cwd}
	c.content = []acp.ToolCallContent{acp.TextContent(w.watchingText())}
	st.out.send(c.update())
	st.list.addCall(c)
}

func (w *watcher) watchingText() string {
	return fmt.Sprintf("Watching %s; each change runs %s as new work. /pause %s pauses it, /stop %s ends it.", w.what(), w.spec.line, w.call.id, w.call.id)
}

// what names what the watch watches.
func (w *watcher) what() string {
	if w.dir {
		return w.spec.path + " and everything under it"
	}
	return "the file " + w.spec.path
}

// rewatch watches w's path anew, as slow work (a big tree takes a while
// to walk): w.src is the new watch, unless it returns an error.
func (w *watcher) rewatch(st *state) error {
	s := st.s
	w.gen++
	gen := w.gen
	st.s.slow()
	src, dir, err := watchChanges(w.abs, watchQuiet,
		func() { s.do(func(st *state) { w.changed(st, gen) }) },
		func(err error) { s.do(func(st *state) { w.failed(st, gen, err) }) })
	w.src, w.dir = src, dir
	return err
}

// owns reports whether t is a run of w.
func (w *watcher) owns(t *turn) bool { return t.origin == w }

// cancellable implements task: a watch is cancelled until it ends.
func (w *watcher) cancellable() bool { return true }

// cancel implements task.
func (w *watcher) cancel(st *state) { w.end(st, acp.StatusCancelled, "Cancelled.") }

// close implements task.
func (w *watcher) close(st *state) { w.end(st, acp.StatusCancelled, "Cancelled: the session closed.") }

// unwatch stops watching, if w does: nothing it reported before runs.
func (w *watcher) unwatch() {
	w.gen++
	if w.src != nil {
		w.src.stop()
		w.src = nil
	}
}

// current reports whether a change that watch gen of w reported runs:
// w is still watching with it.
func (w *watcher) current(gen int) bool {
	return w.call != nil && w.call.state == callRunning && w.gen == gen
}

// changed serves a change that watch gen of w reported: CMD runs as new
// foreground work, at once or held behind the current work; unless its
// previous run still holds or waits for the foreground.
func (w *watcher) changed(st *state, gen int) {
	if st.life != sessionOpen || !w.current(gen) {
		return
	}
	if run := st.turns.runOf(w.owns); run != nil {
		if w.skipped != run {
			w.skipped = run
			st.out.agentMessage(fmt.Sprintf("%s (%s): a change was skipped; the previous run is still going. Changes are skipped silently until it ends.", w.call.title, w.call.id))
		}
		return
	}
	w.runs++
	st.startOrHold(&turn{in: input{cmd: shellLine, line: w.spec.line}, origin: w})
}

// failed serves the end of watch gen of w: its path went away, or could
// not be read.
func (w *watcher) failed(st *state, gen int, err error) {
	if !w.current(gen) {
		return
	}
	text := fmt.Sprintf("Stopped watching %s: %v.", w.spec.path, err)
	w.end(st, acp.StatusFailed, text)
	st.out.agentMessage(text)
}

// end ends w with a final status and a text that says why: it
// watches nothing more, a run of it that waits for the foreground is
// dropped, and it leaves the list.
func (w *watcher) end(st *state, status, text string) {
	if w.call.state >= callDone {
		return
	}
	w.unwatch()
	st.turns.drop(w.owns)
	w.call.content = []acp.ToolCallContent{acp.TextContent(text)}
	endCall(st, w.call, status)
}

// pausable returns the watch that /pause or /resume (verb) of id applies
// to: a watch in state want. If there is none, it says why in an agent
// message and returns nil.
func pausable(st *state, verb, id string, want callState) *watcher {
	c := st.work.calls[id]
	switch {
	case c == nil && st.work.terminals[id] != nil:
		st.out.agentMessage(fmt.Sprintf("Cannot %s %s: it is a terminal; only a watch (/watch) can be paused and resumed. /stop %s stops it.", verb, id, id))
		return nil
	case c == nil:
		st.out.agentMessage(fmt.Sprintf("Cannot %s %s: there is no tool call %q in this session; /ps lists the background work.", verb, id, id))
		return nil
	}
	w, ok := c.task.(*watcher)
	switch {
	case !ok:
		st.out.agentMessage(fmt.Sprintf("Cannot %s %s: it is not a watch; only a watch (/watch) can be paused and resumed.", verb, id))
		return nil
	case c.state == callDone:
		st.out.agentMessage(fmt.Sprintf("Cannot %s %s: it has ended (%s).", verb, id, c.outcome))
		return nil
	case c.state != want && verb == "pause":
		st.out.agentMessage(fmt.Sprintf("%s is paused already; /resume %s resumes it.", id, id))
		return nil
	case c.state != want:
		st.out.agentMessage(fmt.Sprintf("%s is not paused: it is watching.", id))
		return nil
	}
	return w
}

// pauseWatch serves /pause: it applies to a watch only, and says what it
// did, or why not, in an agent message.
func pauseWatch(st *state, id string) {
	w := pausable(st, "pause", id, callRunning)
	if w == nil {
		return
	}
	c := w.call
	w.unwatch()
	st.turns.drop(w.owns)
	c.state = callPaused
	c.content = []acp.ToolCallContent{acp.TextContent(fmt.Sprintf("Paused by /pause: changes to %s run nothing until /resume %s.", w.spec.path, id))}
	st.out.send(c.update())
	st.out.agentMessage(fmt.Sprintf("Paused %s (%s): changes run nothing until /resume %s.", id, c.title, id))
}

// resumeWatch serves /resume: it applies to a watch only, and says what
// it did, or why not, in an agent message.
func resumeWatch(st *state, id string) {
	w := pausable(st, "resume", id, callPaused)
	if w == nil {
		return
	}
	c := w.call
	if err := w.rewatch(st); err != nil {
		text := fmt.Sprintf("Cannot watch %s again: %v.", w.spec.path, err)
		w.end(st, acp.StatusFailed, text)
		st.out.agentMessage(text)
		return
	}
	c.state = callRunning
	c.content = []acp.ToolCallContent{acp.TextContent(w.watchingText())}
	st.out.send(c.update())
	st.out.agentMessage(fmt.Sprintf("Resumed %s (%s): the next change runs %s.", id, c.title, w.spec.line))
}

// listing implements task: the watch's line in /ps.
func (w *watcher) listing(now time.Time) string {
	runs := fmt.Sprintf("ran %d times", w.runs)
	if w.runs == 1 {
		runs = "ran once"
	}
	return fmt.Sprintf("%s  watch %s  %s  age %s  %s, %s", w.call.id, w.spec.path, w.spec.line, age(now.Sub(w.created)), w.call.status(), runs)
}

// changes is a watch on a file or a directory tree, debounced: it calls
// fire once changes have stopped for quiet, and failed once if it can
// watch no more. Both run on a goroutine of their own, never the watch's,
// so they may block. After stop neither starts, but a call that had
// started may still come: the caller tells it apart (watcher.gen).
type changes struct {
	quiet time.Duration
	fire  func()
	fail  func(error)
	tree  io.Closer // the operating system's watch

	mu      sync.Mutex // guards what follows
	timer   *time.Timer
	stopped bool
}

// watchChanges starts watching path, and reports whether it is a
// directory.
func watchChanges(path string, quiet time.Duration, fire func(), failed func(error)) (c *changes, dir bool, err error) {
	c = &changes{quiet: quiet, fire: fire, fail: failed}
	c.tree, dir, err = fswatch.Watch(path, c.changed, c.failed)
	if err != nil {
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			err = pe.Err // the path is the caller's to name
		}
		return nil, false, err
	}
	return c, dir, nil
}

// changed (re)starts the quiet period: on the watch's goroutine, it must
// not block.
func (c *changes) changed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.stopped:
	case c.timer == nil:
		c.timer = time.AfterFunc(c.quiet, func() { c.call(c.fire) })
	default:
		c.timer.Reset(c.quiet)
	}
}

// failed reports, on a goroutine of its own, that the watch ended.
func (c *changes) failed(err error) {
	go c.call(func() { c.fail(err) })
}

// call calls f unless the watch was stopped.
func (c *changes) call(f func()) {
	c.mu.Lock()
	stopped := c.stopped
	c.mu.Unlock()
	if !stopped {
		f()
	}
}

// stop stops watching. It returns once the operating system's watch is
// closed; a call of fire or failed that has begun may still be running.
func (c *changes) stop() {
	c.mu.Lock()
	c.stopped = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	c.tree.Close() // Best effort: closing an inotify descriptor fails only if it was closed.
}

// frozenWatch is a watch as an upgrade in place hands it over
// (freeze.go): the new image watches its path anew, unless it is paused.
// A change made while no image watched (the upgrade's hold) runs nothing.
type frozenWatch struct {
	Path, Line, Abs string
	Dir             bool
	Created         time.Time
	Runs            int
}

// handOver implements task.
func (w *watcher) handOver() (kind string, frozen any) {
	return "Watch", &frozenWatch{Path: w.spec.path, Line: w.spec.line, Abs: w.abs, Dir: w.dir, Created: w.created, Runs: w.runs}
}

// thawWatch makes f the task of tool call c again, in the new image of
// an upgrade in place: it watches again, or ends failed, saying why, if
// it cannot.
func thawWatch(st *state, c *toolCall, f *frozenWatch) {
	w := &watcher{call: c, spec: &watchSpec{path: f.Path, line: f.Line}, abs: f.Abs, dir: f.Dir, created: f.Created, runs: f.Runs}
	c.task = w
	if c.state != callRunning {
		return // paused
	}
	if err := w.rewatch(st); err != nil {
		text := fmt.Sprintf("Cannot watch %s again after the daemon's upgrade in place: %v.", f.Path, err)
		w.end(st, acp.StatusFailed, text)
		st.out.agentMessage(text)
	}
}
