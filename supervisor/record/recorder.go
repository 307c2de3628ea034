// Package record is what keeps a session's history on disk
// (internal/journal) for package supervisor, so that a session outlives
// the agent that ran it: the Recorder of one session, which records what
// the session reports, and Histories, the supervisor's side of every
// session's history (past sessions listed, resumed and deleted; a
// session's Recorder after an upgrade in place), and a history read to be
// made live again (a Past). What a session is, and how one is assembled
// from a Past, stay in package supervisor (supervisor/durable.go,
// supervisor/revive.go).
//
// Files: recorder.go (the Recorder: messages, each tool call's and
// terminal's state patched as a client patches it, exit statuses and a
// turn's end as durable points, forgotten work, config, close, the tee
// from a terminal's ring to the journal), prompts.go (the idempotency
// keys of prompts, and the replies held for a repeated prompt),
// frozen.go (a Recorder's form for the next image of an upgrade in
// place, and the Recorder it thaws to there, or that the journal gives
// without it: Histories.Thaw), histories.go (Histories: session/resume's
// checks and the notice of a resumed past session, session/delete),
// past.go (ReadPast: a history's messages, tool calls and terminals in
// order, what nothing of runs any more: lost terminals, cancelled tool
// calls, each command's terminal) and list.go (session/list's pages of
// live and past sessions, and CheckPages, the check of a sequence of
// them that tests use).
package record

import (
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"shellagent/acp"
	"shellagent/internal/journal"
	"shellagent/outputbuf"
	"shellagent/protocol"
)

// A Recorder records one session's history into a journal.Store: its
// hooks in the session are few (the outbox hands it every update it sends
// and what it forgets, the terminals' output goes through Tee, a
// session's creation, title, config and close are one call each). With no
// store (history off) it records nothing, but still answers repeated
// prompts (PromptOnce). Its methods are safe for concurrent use, but
// Create, which comes before the session is shared. A nil *Recorder
// records nothing (the outbox of a test): only Seed and PromptOnce need
// one.
type Recorder struct {
	store *journal.Store // nil: history off
	id    string

	mu sync.Mutex // guards what follows
	// items is each tool call's and terminal's state as last recorded:
	// an update that patches some fields is recorded as the whole state.
	items map[string]acp.Update
	// keys are the idempotencyKeys of the prompts the session accepted,
	// with their messageIds; held, those of prompts not yet inserted,
	// with the answers that retries of them wait for.
	keys map[string]string
	held map[string][]protocol.Reply
	// reserved is, by id prefix, the highest id number the history
	// holds a reservation for (reserve); shown, the highest recorded.
	reserved, shown map[string]int
}

// IDPrefixes are the prefixes of the ids a session issues (call_N,
// term_N, msg_N), which a reservation covers.
var IDPrefixes = []string{"call", "msg", "term"}

// reserveAhead is how many ids of each prefix one reservation covers
// beyond those the session recorded: a session waits for the disk once
// for that many new tool calls, terminals or messages, and a session
// made live again after its process was killed skips at most that many.
const reserveAhead = 32

// New returns the Recorder of session id into store (nil: history off),
// with nothing recorded yet.
func New(store *journal.Store, id string) *Recorder {
	return &Recorder{store: store, id: id, items: make(map[string]acp.Update), keys: make(map[string]string), held: make(map[string][]protocol.Reply),
		reserved: make(map[string]int), shown: make(map[string]int)}
}

// off reports whether nothing is recorded: history off, or no Recorder
// at all (an outbox of a test).
func (d *Recorder) off() bool { return d == nil || d.store == nil }

// Seed sets the latest state of each tool call and terminal, and the
// idempotency keys, from h, what the journal holds of the session: what
// the session records next patches what was recorded before, and a
// prompt it accepted then is not run again. An update h holds that does
// not decode is skipped.
func (d *Recorder) Seed(h *journal.History) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, it := range h.Updates {
		switch u, _ := journal.DecodeUpdate(it.Update); u := u.(type) {
		case *acp.ToolCallUpdate:
			d.items[u.ToolCallID] = u
		case *acp.TerminalUpdate:
			d.items[u.TerminalID] = u
		}
	}
	for _, it := range h.Prompts {
		d.keys[it.Key] = it.MessageID
	}
}

// Create starts the history of a new session in cwd. A history that
// cannot be created is not kept, and the session goes on without one:
// history is kept beside the session, never in its way. It must be
// called before the Recorder is shared.
func (d *Recorder) Create(cwd string) {
	if d.off() {
		return
	}
	if err := d.store.Create(d.id, journal.Meta{Cwd: cwd}); err != nil {
		d.store = nil
	}
}

// Meta records the session's cwd and title.
func (d *Recorder) Meta(cwd, title string) {
	if !d.off() {
		d.store.Meta(d.id, journal.Meta{Cwd: cwd, Title: title})
	}
}

// Message records a new message, once (Record skips it, as a replay
// sends it again).
func (d *Recorder) Message(m *acp.Message) {
	if !d.off() {
		d.reserve(m.MessageID)
		d.store.Update(d.id, "", m)
	}
}

// reserve makes sure, before the session shows ids (call_N, term_N,
// msg_N), that the history holds each or a reservation at least as high:
// the records of what the session shows are written after it is shown
// (Appends never wait for the disk), so a process killed between the two
// would otherwise leave a client that saw an id the session, made live
// again, issues a second time (SPEC: ids are never reused). Past the
// reservation, it reserves reserveAhead more of every prefix and waits
// for that record to be written.
func (d *Recorder) reserve(ids ...string) {
	d.mu.Lock()
	past := false
	for _, id := range ids {
		prefix, num, _ := strings.Cut(id, "_")
		if n, err := strconv.Atoi(num); err == nil && slices.Contains(IDPrefixes, prefix) {
			d.shown[prefix] = max(d.shown[prefix], n)
			past = past || n > d.reserved[prefix]
		}
	}
	if !past {
		d.mu.Unlock()
		return
	}
	res := make(map[string]int, len(IDPrefixes))
	for _, p := range IDPrefixes {
		d.reserved[p] = max(d.reserved[p], d.shown[p]+reserveAhead)
		res[p] = d.reserved[p]
	}
	d.mu.Unlock()
	d.store.Reserve(d.id, res)
}

// terminalsOf returns the ids of the terminals u's content references.
func terminalsOf(u *acp.ToolCallUpdate) []string {
	var ids []string
	for _, c := range u.Content {
		if c.TerminalID != "" {
			ids = append(ids, c.TerminalID)
		}
	}
	return ids
}

// Record records an update the session sends: a tool call's or
// terminal's as its whole state from now on (patched as a client patches
// it), unless it changes nothing; an exit status as a durable point, and
// so is a state_update that goes idle (a turn's end). Messages (see
// Message), notices and other state_updates are not recorded: they are
// live news, not history.
func (d *Recorder) Record(u acp.Update) {
	if d.off() {
		return
	}
	switch u := u.(type) {
	case *acp.ToolCallUpdate:
		d.reserve(append(terminalsOf(u), u.ToolCallID)...)
		d.recordItem(u.ToolCallID, u)
	case *acp.TerminalUpdate:
		d.reserve(u.TerminalID)
		prev, _ := d.recordItem(u.TerminalID, u).(*acp.TerminalUpdate)
		if u.ExitStatus != nil && (prev == nil || prev.ExitStatus == nil) {
			// Once, not again at each replay; written before it is shown.
			d.store.Exit(d.id, u.TerminalID, *u.ExitStatus)
		}
	case *acp.StateUpdate:
		if u.State == acp.StateIdle {
			d.store.Sync(d.id)
		}
	}
}

// recordItem records item id's state patched by u, unless u changes
// nothing (a replay re-sends what is recorded). It returns the state
// recorded before, nil if none.
func (d *Recorder) recordItem(id string, u acp.Update) (prev acp.Update) {
	d.mu.Lock()
	prev = d.items[id]
	next := patch(prev, u)
	same := prev != nil && reflect.DeepEqual(prev, next)
	d.items[id] = next
	d.mu.Unlock()
	if !same {
		d.store.Update(d.id, id, next)
	}
	return prev
}

// patch returns prev with the fields that u sets, as a client applies a
// tool_call_update or terminal_update; prev is not changed. With no prev
// of u's type, it is a copy of u; an update of another type is returned
// as it is.
func patch(prev, u acp.Update) acp.Update {
	switch u := u.(type) {
	case *acp.ToolCallUpdate:
		p, _ := prev.(*acp.ToolCallUpdate)
		if p == nil {
			c := *u
			return &c
		}
		c := *p
		c.SessionUpdate = u.SessionUpdate
		acp.Merge(&c, u)
		return &c
	case *acp.TerminalUpdate:
		p, _ := prev.(*acp.TerminalUpdate)
		if p == nil {
			c := *u
			return &c
		}
		c := *p
		acp.Merge(&c, u)
		return &c
	}
	return u
}

// Forget drops retired work, tool call or terminal item, from the
// history.
func (d *Recorder) Forget(item string) {
	if d.off() {
		return
	}
	d.mu.Lock()
	delete(d.items, item)
	d.mu.Unlock()
	d.store.Forget(d.id, item)
}

// Config records that the session's config option id has value from now
// on, so that the session has it again when it is revived.
func (d *Recorder) Config(id, value string) {
	if !d.off() {
		d.store.Config(d.id, id, value)
	}
}

// Closed records that the session closed: it is past from now on.
func (d *Recorder) Closed() {
	if !d.off() {
		d.store.Closed(d.id)
	}
}

// Tee returns where terminal term's output goes: its ring, which the
// history reads on its own schedule (journal.Tap); each write only tells
// it that there is more. With history off, or a session the store does
// not have, it is the ring itself. The writer is the ring's: one
// goroutine writes to it at a time.
func (d *Recorder) Tee(term string, ring *outputbuf.Ring) io.Writer {
	if d.off() {
		return ring
	}
	tap := d.store.Attach(d.id, term, ring)
	if tap == nil {
		return ring
	}
	return teeWriter{ring, tap}
}

type teeWriter struct {
	ring *outputbuf.Ring
	tap  *journal.Tap
}

func (w teeWriter) Write(p []byte) (int, error) {
	n, err := w.ring.Write(p)
	w.tap.Wrote()
	return n, err
}
