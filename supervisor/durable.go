package supervisor

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"shellagent/acp"
	"shellagent/internal/journal"
	"shellagent/outputbuf"
	"shellagent/protocol"
)

// A session's history on disk (package journal, Config.History): the
// one piece that records what a session reports, so that the session
// outlives the agent that ran it. Its hooks in the session are few: the
// outbox hands it every update it sends (record: messages, each tool
// call's and terminal's state, exit statuses; a state_update going idle
// is a turn's end, a durable point), and what it forgets; the history
// reads a terminal's output from its ring (tee); a session's creation,
// title and close are one line each. The rest is here (listing past
// sessions, finding and reopening one to make it live again, which
// Supervisor.ResumeSession then does with revive.go, session/delete,
// idempotencyKey).

// durable records one session's history. Its methods are safe for
// concurrent use; with no store (history off) they do nothing.
type durable struct {
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
}

// off reports whether nothing is recorded: history off, or no durable
// at all (an outbox of a test).
func (d *durable) off() bool { return d == nil || d.store == nil }

func newDurable(store *journal.Store, id string) *durable {
	return &durable{store: store, id: id, items: make(map[string]acp.Update), keys: make(map[string]string), held: make(map[string][]protocol.Reply)}
}

// frozenDurable is a session's durable as an upgrade in place hands it
// over (freeze.go): what histories.reopen would read back from the journal,
// which the new image then need not read and parse.
type frozenDurable struct {
	Items map[string]json.RawMessage
	Keys  map[string]string
}

// frozen returns d as the next image of an upgrade needs it, or nil with
// history off.
func (d *durable) frozen() (*frozenDurable, error) {
	if d.off() {
		return nil, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	f := &frozenDurable{Items: make(map[string]json.RawMessage, len(d.items)), Keys: maps.Clone(d.keys)}
	for id, u := range d.items {
		b, err := json.Marshal(u)
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", id, err)
		}
		f.Items[id] = b
	}
	return f, nil
}

// histories is the Supervisor's side of the history: every session's, in
// store (nil: history off), where a session's durable comes from after an
// upgrade, and past sessions are listed and made live again.
type histories struct {
	store *journal.Store // nil: history off
	log   *slog.Logger
}

// has reports whether the history has session id.
func (hs histories) has(id string) bool { return hs.store != nil && hs.store.Exists(id) }

// thaw is the history of session id after an upgrade in place, from what
// the old image handed over (f), or, without it, from the journal
// (reopen).
func (hs histories) thaw(id string, f *frozenDurable) *durable {
	if f == nil || !hs.has(id) {
		return hs.reopen(id)
	}
	d := newDurable(hs.store, id)
	for item, raw := range f.Items {
		if u, err := journal.DecodeUpdate(raw); err == nil {
			d.items[item] = u
		}
	}
	maps.Copy(d.keys, f.Keys)
	hs.store.Reopen(id)
	return d
}

// reopen is the history of session id after an upgrade in place: what
// the journal holds of it seeds the latest state of each item and the
// idempotency keys, as a resume of a past session does, so that what the
// session records next patches what was recorded before.
func (hs histories) reopen(id string) *durable {
	d := newDurable(hs.store, id)
	if !hs.has(id) {
		d.store = nil // nothing to add to: a session without history stays so
		return d
	}
	h, err := hs.store.Reopen(id)
	if err != nil {
		hs.log.Warn("upgrade: the session's history cannot be read; it keeps no more", "session", id, "err", err)
		d.store = nil
		return d
	}
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
	return d
}

// create starts the history of a new session.
func (d *durable) create(cwd string) {
	if d.off() {
		return
	}
	if err := d.store.Create(d.id, journal.Meta{Cwd: cwd}); err != nil {
		// History is kept beside the session, never in its way.
		d.store = nil
	}
}

// meta records the session's cwd and title.
func (d *durable) meta(cwd, title string) {
	if !d.off() {
		d.store.Meta(d.id, journal.Meta{Cwd: cwd, Title: title})
	}
}

// message records a new message.
func (d *durable) message(m *acp.Message) {
	if !d.off() {
		d.store.Update(d.id, "", m)
	}
}

// record records an update the outbox sends (a message is recorded once,
// by message, as a replay sends it again): a tool call's or terminal's as its whole state from now on, once it
// changes it; an exit status as a durable point, and so is a
// state_update that goes idle (a turn's end). Notices and other
// state_updates are live news, not history.
func (d *durable) record(u acp.Update) {
	if d.off() {
		return
	}
	switch u := u.(type) {
	case *acp.ToolCallUpdate:
		d.recordItem(u.ToolCallID, u)
	case *acp.TerminalUpdate:
		d.recordItem(u.TerminalID, u)
		if u.ExitStatus != nil {
			d.store.Exit(d.id, u.TerminalID, *u.ExitStatus)
		}
	case *acp.StateUpdate:
		if u.State == acp.StateIdle {
			d.store.Sync(d.id)
		}
	}
}

// recordItem records item id's state patched by u, unless u changes
// nothing (a replay re-sends what is recorded).
func (d *durable) recordItem(id string, u acp.Update) {
	d.mu.Lock()
	prev := d.items[id]
	next := patch(prev, u)
	same := prev != nil && reflect.DeepEqual(prev, next)
	d.items[id] = next
	d.mu.Unlock()
	if !same {
		d.store.Update(d.id, id, next)
	}
}

// patch returns prev with the fields that u sets, as a client applies a
// tool_call_update or terminal_update; prev is not changed.
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

// forget drops retired work from the history.
func (d *durable) forget(retired entry) {
	if d.off() {
		return
	}
	id := ""
	switch {
	case retired.call != nil:
		id = retired.call.id
	case retired.term != nil:
		id = retired.term.id
	default:
		return
	}
	d.mu.Lock()
	delete(d.items, id)
	d.mu.Unlock()
	d.store.Forget(d.id, id)
}

// config records that the session's config option id has value from now
// on, so that the session has it again when it is revived.
func (d *durable) config(id, value string) {
	if !d.off() {
		d.store.Config(d.id, id, value)
	}
}

// closed records that the session closed: it is past from now on.
func (d *durable) closed() {
	if !d.off() {
		d.store.Closed(d.id)
	}
}

// tee returns where terminal term's output goes: its ring, which the
// history reads on its own schedule (journal.Tap); each write only tells
// it that there is more.
func (d *durable) tee(term string, ring *outputbuf.Ring) io.Writer {
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

// promptOnce serves a session/prompt with an idempotencyKey: a key the
// session accepted already is answered with its messageId, and one whose
// prompt is held is answered with it once it is inserted; the prompt runs
// at most once.
func (s *Session) promptOnce(p *acp.PromptRequest, run func(reply protocol.Reply), reply protocol.Reply) {
	d, key := s.disk, p.IdempotencyKey
	d.mu.Lock()
	if id, ok := d.keys[key]; ok {
		d.mu.Unlock()
		reply(&acp.PromptResponse{MessageID: id}, nil)
		return
	}
	if waiting, ok := d.held[key]; ok {
		d.held[key] = append(waiting, reply)
		d.mu.Unlock()
		return
	}
	d.held[key] = nil
	d.mu.Unlock()
	run(func(result any, err error) {
		d.mu.Lock()
		waiting := d.held[key]
		delete(d.held, key)
		if r, ok := result.(*acp.PromptResponse); ok && err == nil {
			d.keys[key] = r.MessageID
			if !d.off() {
				d.store.Prompt(d.id, key, r.MessageID)
			}
		}
		d.mu.Unlock()
		reply(result, err)
		for _, w := range waiting {
			w(result, err)
		}
	})
}

// Session states in session/list's _meta.shellagent.state.
const (
	listAttached = "attached" // live, reporting to a client
	listDetached = "detached" // live, with no client
	listPast     = "past"     // only in the history: resuming it makes it live again
	// live in another process that shares the state directory (another
	// stdio agent, or the daemon): it cannot be resumed here.
	listElsewhere = "elsewhere"
)

// liveElsewhere is the error of session/resume and session/delete of a
// session that another process sharing the state directory has live (err
// names it, where it can).
func liveElsewhere(method, id string, err error) *acp.Error {
	proc, data := "another shellagent process", map[string]any{"sessionId": id, "state": listElsewhere}
	if le := (*journal.LiveError)(nil); errors.As(err, &le) && le.PID != 0 {
		proc, data["pid"] = fmt.Sprintf("another shellagent process (pid %d)", le.PID), le.PID
	}
	return &acp.Error{Code: acp.CodeInvalidRequest,
		Message: method + " " + id + ": the session is live in " + proc + " that shares the state directory " +
			"(another stdio agent, or the daemon); resume it there, or end that process first",
		Data: data}
}

// listPage is how many sessions one session/list answer holds at most.
var listPage = 100

// list serves session/list: the live sessions (oldest first) and the past
// ones of the history, the most recently updated first, a page at a time.
func (hs histories) list(p *acp.ListSessionsRequest, live []*Session) (*acp.ListSessionsResponse, error) {
	type row struct {
		info acp.SessionInfo
		key  string // the order: updatedAt (RFC 3339 UTC, nanoseconds) descending, then id
	}
	var rows []row
	isLive := make(map[string]bool)
	// _meta.shellagent: attached to a connection, detached, or past, and
	// the terminals that run (shellagent client's /sessions shows them).
	add := func(info acp.SessionInfo, at string, state string, terminals []string) {
		if p.Cwd != nil && filepath.Clean(*p.Cwd) != filepath.Clean(info.Cwd) {
			return
		}
		info.Meta = map[string]any{"shellagent": map[string]any{"state": state, "terminals": terminals}}
		rows = append(rows, row{info, at + "\x00" + info.SessionID})
	}
	for _, s := range live {
		isLive[s.id] = true
		info, at, v := s.listing()
		add(info, at, map[bool]string{true: listAttached, false: listDetached}[v.attached], v.terminals)
	}
	if store := hs.store; store != nil {
		if err := store.Refresh(); err != nil {
			hs.log.Warn("session/list: reading the history again", "err", err)
		}
		for _, h := range store.List() {
			if isLive[h.ID] {
				continue
			}
			info := acp.SessionInfo{SessionID: h.ID, Cwd: h.Cwd, Title: h.Title, UpdatedAt: h.UpdatedAt.UTC().Format(rfc3339)}
			add(info, h.UpdatedAt.UTC().Format(sortable), map[bool]string{false: listPast, true: listElsewhere}[h.Elsewhere], []string{})
		}
	}
	sortRows := func(a, b row) int { return -strings.Compare(a.key, b.key) }
	slices.SortFunc(rows, sortRows)
	start := 0
	if p.Cursor != nil {
		after, err := readCursor(*p.Cursor)
		if err != nil {
			return nil, err
		}
		// The first row past the cursor: rows are sorted by key, descending.
		start, _ = slices.BinarySearchFunc(rows, after, func(r row, key string) int { return -strings.Compare(r.key, key) })
		if start < len(rows) && rows[start].key == after {
			start++
		}
	}
	out := &acp.ListSessionsResponse{Sessions: []acp.SessionInfo{}}
	for i := start; i < len(rows); i++ {
		if len(out.Sessions) == listPage {
			next := base64.RawURLEncoding.EncodeToString([]byte(rows[i-1].key))
			out.NextCursor = &next
			break
		}
		out.Sessions = append(out.Sessions, rows[i].info)
	}
	return out, nil
}

// readCursor reads a cursor of session/list: the key of the last row of
// the page before.
func readCursor(cursor string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	at, id, ok := strings.Cut(string(b), "\x00")
	if err == nil && ok && id != "" {
		if _, err = time.Parse(sortable, at); err == nil {
			return string(b), nil
		}
	}
	return "", acp.InvalidParams("cursor: unknown cursor %q (pass the nextCursor of the previous page)", cursor)
}

// listing is the session's row in session/list: its info, the time it
// last reported (sortable), and the snapshot it was read from.
func (s *Session) listing() (info acp.SessionInfo, at string, v *snapshot) {
	v = s.peek()
	info = acp.SessionInfo{SessionID: s.id, Cwd: s.cwd, Title: v.title, UpdatedAt: v.updatedAt.UTC().Format(rfc3339)}
	return info, v.updatedAt.UTC().Format(sortable), v
}

const (
	rfc3339  = "2006-01-02T15:04:05Z07:00"
	sortable = "2006-01-02T15:04:05.000000000Z" // fixed width: sorts as it reads
)

// DeleteSession implements protocol.SessionDeleter: a live session is
// closed first, as session/close does; then its history is removed for
// good, and session/list no longer lists it.
func (sv *Supervisor) DeleteSession(c protocol.Client, p *acp.DeleteSessionRequest, reply protocol.Reply) {
	erase := func() {
		if store := sv.cfg.History; store != nil {
			switch err := store.Delete(p.SessionID); {
			case errors.Is(err, journal.ErrLive):
				reply(nil, liveElsewhere("session/delete", p.SessionID, err))
				return
			case err != nil && !errors.Is(err, journal.ErrNotFound):
				reply(nil, fmt.Errorf("session/delete %s: %w", p.SessionID, err))
				return
			}
		}
		reply(struct{}{}, nil)
	}
	if s, err := sv.session(p.SessionID); err == nil {
		s.close(erase)
		return
	}
	if !sv.histories.has(p.SessionID) {
		reply(nil, acp.SessionNotFound(p.SessionID))
		return
	}
	erase()
}

// resume is the history of past session p.SessionID, which session/resume
// makes live again (revive), once the request is checked against it and
// the session is live in the history (and locked against other
// processes): what it holds then is the whole of it. A session that the
// history does not have answers -32002.
func (hs histories) resume(p *acp.ResumeSessionRequest) (*journal.History, error) {
	var info journal.Info
	ok := hs.store != nil
	if ok {
		info, ok = hs.store.Stat(p.SessionID)
	}
	if !ok {
		return nil, acp.SessionNotFound(p.SessionID)
	}
	if filepath.Clean(p.Cwd) != filepath.Clean(info.Cwd) {
		return nil, acp.InvalidParams("cwd: %q is not this session's working directory %q", p.Cwd, info.Cwd)
	}
	if _, err := replayFrom(p.ReplayFrom); err != nil {
		return nil, err
	}
	h, err := hs.store.Reopen(p.SessionID)
	switch {
	case errors.Is(err, journal.ErrLive):
		return nil, liveElsewhere("session/resume", p.SessionID, err)
	case errors.Is(err, journal.ErrNotFound):
		return nil, acp.SessionNotFound(p.SessionID)
	case err != nil:
		return nil, fmt.Errorf("session/resume %s: reading its history: %w", p.SessionID, err)
	}
	return h, nil
}

var _ protocol.SessionDeleter = (*Supervisor)(nil)
