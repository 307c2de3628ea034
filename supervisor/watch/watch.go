// Package watch is a kind of work of a session (package supervisor,
// through supervisor/work): /watch PATH CMD, and /pause and /resume.
// watch.go holds the watch, its runs, pausing and its frozen form for an
// upgrade in place; changes.go the debounced watch of the tree
// (internal/fswatch); commands.go the entries of /watch, /pause and
// /resume in the session's command table (Commands).
package watch

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"shellagent/acp"
	"shellagent/internal/words"
	"shellagent/supervisor/work"
)

// A Watch (/watch PATH CMD) is a listed tool call, in_progress while it
// watches PATH (a directory with everything under it, or a file), with no
// process of its own. Each change, once changes have stopped for
// Quiet, runs CMD as new foreground work, as a recurring job's
// firing does (supervisor/jobs), with the same rule: a change that comes
// while the previous run still holds or waits for the foreground runs
// nothing, and says so once per such run. /pause makes it paused: it
// stops watching, so a change meanwhile runs nothing, then or later;
// /resume watches again, and the next change runs CMD. Cancel
// (tool_call/cancel, /stop) and close end it cancelled; a PATH that goes
// away ends it failed. Its state is its tool call's: in_progress, paused,
// then final. It is owned by its session's actor.
//
// The operating system's side, watching a tree and reporting that
// something changed, is package internal/fswatch (inotify); here it is
// debounced (changes) and served in the session.
type Watch struct {
	h       work.Host
	call    work.Call
	spec    *Spec
	abs     string // the path watched
	dir     bool   // it is a directory, watched with everything under it
	created time.Time
	src     *changes   // the watch on abs; nil while paused, and once ended
	gen     int        // counts the watches on abs made so far; a change reported by an older one is stale
	skipped work.RunID // the run during which a change was skipped and said so
	runs    int        // changes that ran CMD
}

// Quiet is how long changes must stop before the watch runs CMD: an
// editor's save or a checkout is many changes in a row.
const Quiet = 200 * time.Millisecond

// Spec is what /watch watches and runs.
type Spec struct {
	Path string // as written
	Line string // the command
}

// Parse reads the arguments of /watch: a path (quoted as /wait's words
// are) and the rest of the line, the command. problem, if not empty, says
// what is wrong with them.
func Parse(rest string) (spec *Spec, problem string) {
	path, line, ok, err := words.Next(rest)
	switch {
	case err != nil:
		return nil, "/watch: " + err.Error()
	case !ok || path.Text == "" || line == "":
		return nil, "/watch needs a path and a command"
	}
	return &Spec{Path: path.Text, Line: line}, ""
}

// Start serves /watch in the session h: once PATH is watched (slow work:
// a big tree takes a while), the tool call is announced in_progress and
// cancellable, then listed. A PATH that cannot be watched is refused in
// an agent message, nothing is announced, and Start returns nil.
func Start(h work.Host, spec *Spec) *Watch {
	abs := spec.Path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(h.Cwd(), abs)
	}
	w := &Watch{h: h, spec: spec, abs: abs, created: time.Now()}
	if err := w.rewatch(); err != nil {
		h.Say(fmt.Sprintf("Cannot watch %s: %v.", spec.Path, err))
		return nil
	}
	w.call = h.NewCall(work.CallSpec{
		Kind: "other", Title: "watch " + spec.Path + ": " + spec.Line,
		Input: map[string]string{"path": spec.Path, "command": spec.Line, "cwd": h.Cwd()},
	}, w)
	w.call.SetContent(acp.TextContent(w.watchingText()))
	w.call.Send()
	w.call.List()
	return w
}

// Call returns the watch's tool call.
func (w *Watch) Call() work.Call { return w.call }

func (w *Watch) watchingText() string {
	return fmt.Sprintf("Watching %s; each change runs %s as new work. /pause %s pauses it, /stop %s ends it.", w.what(), w.spec.Line, w.call.ID(), w.call.ID())
}

// what names what the watch watches.
func (w *Watch) what() string {
	if w.dir {
		return w.spec.Path + " and everything under it"
	}
	return "the file " + w.spec.Path
}

// rewatch watches w's path anew, as slow work (a big tree takes a while
// to walk): w.src is the new watch, unless it returns an error.
func (w *Watch) rewatch() error {
	h := w.h
	w.gen++
	gen := w.gen
	h.Slow()
	src, dir, err := watchChanges(w.abs, Quiet,
		func() { h.Do(func() { w.changed(gen) }) },
		func(err error) { h.Do(func() { w.failed(gen, err) }) })
	w.src, w.dir = src, dir
	return err
}

// Cancellable implements work.Task: a watch is cancelled until it ends.
func (w *Watch) Cancellable() bool { return true }

// Cancel implements work.Task.
func (w *Watch) Cancel() { w.end(acp.StatusCancelled, "Cancelled.") }

// Close implements work.Task.
func (w *Watch) Close() { w.end(acp.StatusCancelled, "Cancelled: the session closed.") }

// unwatch stops watching, if w does: nothing it reported before runs.
func (w *Watch) unwatch() {
	w.gen++
	if w.src != nil {
		w.src.stop()
		w.src = nil
	}
}

// current reports whether a change that watch gen of w reported runs:
// w is still watching with it.
func (w *Watch) current(gen int) bool {
	return w.call != nil && w.call.Status() == acp.StatusInProgress && w.gen == gen
}

// changed serves a change that watch gen of w reported: CMD runs as new
// foreground work, at once or held behind the current work; unless its
// previous run still holds or waits for the foreground.
func (w *Watch) changed(gen int) {
	if !w.h.Open() || !w.current(gen) {
		return
	}
	if run := w.h.RunOf(w); run != work.NoRun {
		if w.skipped != run {
			w.skipped = run
			w.h.Say(fmt.Sprintf("%s (%s): a change was skipped; the previous run is still going. Changes are skipped silently until it ends.", w.call.Title(), w.call.ID()))
		}
		return
	}
	w.runs++
	w.h.Run(w.spec.Line, w)
}

// failed serves the end of watch gen of w: its path went away, or could
// not be read.
func (w *Watch) failed(gen int, err error) {
	if !w.current(gen) {
		return
	}
	text := fmt.Sprintf("Stopped watching %s: %v.", w.spec.Path, err)
	w.end(acp.StatusFailed, text)
	w.h.Say(text)
}

// end ends w with a final status and a text that says why: it watches
// nothing more, a run of it that waits for the foreground is dropped, and
// it leaves the list.
func (w *Watch) end(status, text string) {
	if w.call.Final() {
		return
	}
	w.unwatch()
	w.h.DropRuns(w)
	w.call.SetContent(acp.TextContent(text))
	w.call.End(status)
}

// pausable returns the watch that /pause or /resume (verb) of id applies
// to: a watch whose status is want. If there is none, it says why in an
// agent message and returns nil.
func pausable(h work.Host, verb, id, want string) *Watch {
	c, t, terminal := h.Find(id)
	switch {
	case c == nil && terminal:
		h.Say(fmt.Sprintf("Cannot %s %s: it is a terminal; only a watch (/watch) can be paused and resumed. /stop %s stops it.", verb, id, id))
		return nil
	case c == nil:
		h.Say(fmt.Sprintf("Cannot %s %s: there is no tool call %q in this session; /ps lists the background work.", verb, id, id))
		return nil
	}
	w, ok := t.(*Watch)
	switch {
	case !ok:
		h.Say(fmt.Sprintf("Cannot %s %s: it is not a watch; only a watch (/watch) can be paused and resumed.", verb, id))
		return nil
	case c.Final():
		h.Say(fmt.Sprintf("Cannot %s %s: it has ended (%s).", verb, id, c.Status()))
		return nil
	case c.Status() != want && verb == "pause":
		h.Say(fmt.Sprintf("%s is paused already; /resume %s resumes it.", id, id))
		return nil
	case c.Status() != want:
		h.Say(fmt.Sprintf("%s is not paused: it is watching.", id))
		return nil
	}
	return w
}

// Pause serves /pause ID in the session h: it applies to a watch only,
// and says what it did, or why not, in an agent message.
func Pause(h work.Host, id string) {
	w := pausable(h, "pause", id, acp.StatusInProgress)
	if w == nil {
		return
	}
	c := w.call
	w.unwatch()
	h.DropRuns(w)
	c.SetPaused(true)
	c.SetContent(acp.TextContent(fmt.Sprintf("Paused by /pause: changes to %s run nothing until /resume %s.", w.spec.Path, id)))
	c.Send()
	h.Say(fmt.Sprintf("Paused %s (%s): changes run nothing until /resume %s.", id, c.Title(), id))
}

// Resume serves /resume ID in the session h: it applies to a watch only,
// and says what it did, or why not, in an agent message.
func Resume(h work.Host, id string) {
	w := pausable(h, "resume", id, acp.StatusPaused)
	if w == nil {
		return
	}
	c := w.call
	if err := w.rewatch(); err != nil {
		text := fmt.Sprintf("Cannot watch %s again: %v.", w.spec.Path, err)
		w.end(acp.StatusFailed, text)
		h.Say(text)
		return
	}
	c.SetPaused(false)
	c.SetContent(acp.TextContent(w.watchingText()))
	c.Send()
	h.Say(fmt.Sprintf("Resumed %s (%s): the next change runs %s.", id, c.Title(), w.spec.Line))
}

// Listing implements work.Task: the watch's line in /ps.
func (w *Watch) Listing(now time.Time) string {
	runs := fmt.Sprintf("ran %d times", w.runs)
	if w.runs == 1 {
		runs = "ran once"
	}
	return fmt.Sprintf("%s  watch %s  %s  age %s  %s, %s", w.call.ID(), w.spec.Path, w.spec.Line, work.Age(now.Sub(w.created)), w.call.Status(), runs)
}

// Frozen is a watch as an upgrade in place hands it over
// (Task.HandOver): the new image watches its path anew, unless it is
// paused. A change made while no image watched (the upgrade's hold) runs
// nothing. Its encoding is the upgrade's format: its fields are never
// renamed.
type Frozen struct {
	Path, Line, Abs string
	Dir             bool
	Created         time.Time
	Runs            int
}

// HandOver implements work.Task.
func (w *Watch) HandOver() (kind string, frozen any) {
	return kindName, &Frozen{Path: w.spec.Path, Line: w.spec.Line, Abs: w.abs, Dir: w.dir, Created: w.created, Runs: w.runs}
}

// Kind is the kind of work of a watch.
var Kind = work.Kind{Name: kindName, Thaw: thaw}

// kindName is what a watch's frozen form is written under.
const kindName = "Watch"

// thaw makes frozen the task of tool call c again, in the new image of an
// upgrade in place: it watches again, or ends failed, saying why, if it
// cannot.
func thaw(h work.Host, c work.Call, frozen json.RawMessage) (work.Task, error) {
	var f Frozen
	if err := json.Unmarshal(frozen, &f); err != nil {
		return nil, fmt.Errorf("thaw watch %s: %w", c.ID(), err)
	}
	w := &Watch{h: h, call: c, spec: &Spec{Path: f.Path, Line: f.Line}, abs: f.Abs, dir: f.Dir, created: f.Created, runs: f.Runs}
	if c.Status() != acp.StatusInProgress {
		return w, nil // paused
	}
	if err := w.rewatch(); err != nil {
		text := fmt.Sprintf("Cannot watch %s again after the daemon's upgrade in place: %v.", f.Path, err)
		w.end(acp.StatusFailed, text)
		h.Say(text)
	}
	return w, nil
}
