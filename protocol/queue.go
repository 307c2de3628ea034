package protocol

import (
	"fmt"
	"slices"

	"shellagent/acp"
)

// coalesceAt is how many pending entries make a client "far behind":
// from then on, and while it is stalled, superseded updates are coalesced.
const coalesceAt = 1024

// keepFinished is how many finished items (tool calls and terminals that
// ended before the client heard of them) a stalled connection keeps
// queued; older ones are dropped unannounced.
const keepFinished = 100

// keepNotices is how many notices a stalled or far-behind connection
// keeps queued; older ones are dropped. The schema makes a notice
// fire-and-forget (agents must not rely on one being received), so a
// client that does not read loses the oldest rather than costing memory
// for each.
const keepNotices = 32

// controlQueue holds the control messages that the writer has not taken
// yet, in order. While the client is stalled or far behind (coalesceAt
// pending entries), it coalesces superseded updates, so that such a client
// costs memory in proportion to the live items, not to what happened
// meanwhile; a client that keeps up gets every update:
//
//   - a state_update replaces the previous pending state_update of its
//     session (each is complete), and takes its place at the end;
//   - a tool_call_update or terminal_update patch is merged into the
//     pending patch of the same item, which moves to the end; an item's
//     first pending update stays where it is, so that an item is always
//     announced before the state_update that lists it;
//   - nothing moves across a message, a response, a request or an output
//     replacement ("fixed" entries): turns, replies and permission
//     requests keep their place among the updates;
//   - a state_update that would report, as idle with an empty list, the
//     removal of items that an earlier pending state_update reported with
//     another state is not merged, so that a follow-up reported together
//     with a removal stays so (acptest rule 8);
//   - while the client is stalled, dropFinished drops the oldest finished
//     items beyond keepFinished that the client never heard of and nothing
//     fixed refers to;
//   - a notice is not fixed (updates may move past it: it is no part of
//     the session's history), and only the last keepNotices pending
//     notices are kept.
//
// A session has an entry in sessions only while it has a pending
// state_update or its last one listed background work (which the rule on
// removals needs): a session that ended, whose last state_update lists
// nothing, costs nothing, and take looks only at the sessions it took
// state_updates of.
//
// The result honours the rules the strict client checks: announced before
// listed, final status before removal, one exit per terminal, output only
// between a terminal's first update and its exit.
//
// A controlQueue is guarded by its writer's mutex.
type controlQueue struct {
	entries   []*entry // pending entries in order; nil where one was removed
	holes     int      // nil entries
	seq       uint64   // seq of the last entry pushed
	lastFixed uint64   // seq of the last fixed entry
	items     map[itemKey]*item
	sessions  map[string]*sessionStates
	touched   []*sessionStates // sessions with pending state_updates
	finished  []*item          // finished items announced by a pending entry, oldest first
	notices   []*entry         // pending notices, oldest first
	stalled   bool             // the writer's peer is stalled; the writer owns it
}

// entry is one queued message.
type entry struct {
	seq     uint64
	index   int    // in controlQueue.entries
	line    []byte // a complete JSON-RPC message, or:
	session string
	update  acp.Update
	stream  *stream    // terminal updates: the terminal's output
	mode    OutputMode // terminal updates
	item    *item      // tool call and terminal updates
	taken   bool       // taken by the writer's goroutine
	attach  bool       // the client attaches to session from here on (encoding.attached)
}

type itemKind int

const (
	toolCallItem itemKind = iota
	terminalItem
)

type itemKey struct {
	session string
	kind    itemKind
	id      string
}

// item is a tool call or terminal that has pending updates, or a tool
// call that has not finished yet. (A terminal's stream says whether the
// client heard of it: idle terminals are many, and cost no item.)
type item struct {
	key    itemKey
	first  *entry // its first pending update, fixed in place; nil once taken
	latest *entry // later updates, merged; nil once taken
	fresh  bool   // first is the item's first update on this connection
	done   bool   // its final status (exit status) is queued
}

// sessionStates tracks a session's state_updates.
type sessionStates struct {
	id       string
	last     *entry               // the last state_update queued, pending or taken
	prevList []acp.BackgroundItem // the list of the state_update queued before last
	pending  []*entry             // pending state_updates
	released bool                 // forget it once pending is taken
}

func newControlQueue() controlQueue {
	return controlQueue{items: make(map[itemKey]*item), sessions: make(map[string]*sessionStates)}
}

// coalescing reports whether the client is stalled or far behind.
func (q *controlQueue) coalescing() bool {
	return q.stalled || len(q.entries)-q.holes >= coalesceAt
}

func (q *controlQueue) push(e *entry) *entry {
	q.seq++
	e.seq, e.index = q.seq, len(q.entries)
	q.entries = append(q.entries, e)
	return e
}

// addLine queues a complete message.
func (q *controlQueue) addLine(line []byte) {
	q.addFixed(&entry{line: line})
}

// addAttach queues the point where the client attaches to session again:
// fixed, so that every update queued before it is written before it and
// every one queued after it after it.
func (q *controlQueue) addAttach(session string) {
	q.addFixed(&entry{session: session, attach: true})
}

func (q *controlQueue) addFixed(e *entry) {
	q.lastFixed = q.push(e).seq
}

// addUpdate queues a session update.
func (q *controlQueue) addUpdate(session string, update acp.Update) {
	if acp.StateOf(update) != nil {
		q.addState(session, update) // a *acp.StateUpdate, or one the kit crafted
		return
	}
	switch u := update.(type) {
	case *acp.ToolCallUpdate:
		q.addItemUpdate(&entry{session: session, update: u}, itemKey{session, toolCallItem, u.ToolCallID}, acp.FinalStatus(u.Status))
	case *acp.Message, *acp.TerminalUpdate:
		// A terminal update queued here is plain data, with no output
		// stream (see Client.Update): it is fixed, like a message.
		q.addFixed(&entry{session: session, update: update})
	case *acp.Notice:
		q.addNotice(&entry{session: session, update: u})
	default:
		panic(fmt.Sprintf("addUpdate: unknown update %T", update))
	}
}

// addNotice queues a notice; while coalescing, the oldest pending one
// beyond keepNotices is dropped.
func (q *controlQueue) addNotice(e *entry) {
	q.notices = append(q.notices, q.push(e))
	if q.coalescing() && len(q.notices) > keepNotices {
		q.remove(q.notices[0])
		q.notices = slices.Delete(q.notices, 0, 1)
	}
}

// addTerminal queues a terminal update with its output stream.
func (q *controlQueue) addTerminal(session string, u *acp.TerminalUpdate, s *stream, mode OutputMode) {
	e := &entry{session: session, update: u, stream: s, mode: mode}
	key := itemKey{session, terminalItem, u.TerminalID}
	if mode == ReplaceOutput {
		// A full state with the output: fixed, and the item is not fresh.
		it := q.items[key]
		if it == nil {
			it = &item{key: key}
			q.items[key] = it
		}
		it.done = it.done || u.ExitStatus != nil
		e.item = it
		q.addFixed(e)
		return
	}
	q.addItemUpdate(e, key, u.ExitStatus != nil)
}

func (q *controlQueue) addItemUpdate(e *entry, key itemKey, final bool) {
	it := q.items[key]
	switch {
	case it == nil:
		it = &item{key: key, fresh: e.stream == nil || !e.stream.announced}
		q.items[key] = it
		e.item = it
		it.first = q.push(e)
	case q.coalescing() && it.latest != nil && it.latest.seq > q.lastFixed:
		merge(it.latest.update, e.update)
		q.moveToEnd(it.latest)
	default:
		e.update = clone(e.update) // merges change the copy, not the caller's
		e.item = it
		it.latest = q.push(e)
	}
	if final && !it.done {
		it.done = true
		if it.fresh && it.first != nil {
			q.finished = append(q.finished, it)
		}
	}
}

// addState queues a state snapshot: u is one for which acp.StateOf says
// what it reports.
func (q *controlQueue) addState(session string, u acp.Update) {
	ss := q.sessions[session]
	if ss == nil {
		ss = &sessionStates{id: session}
		q.sessions[session] = ss
	}
	if l := ss.last; q.coalescing() && l != nil && !l.taken && l.seq > q.lastFixed && !keepsFollowUp(ss.prevList, acp.StateOf(l.update), acp.StateOf(u)) {
		l.update = u
		q.moveToEnd(l)
		return
	}
	if ss.last != nil {
		ss.prevList = acp.StateOf(ss.last.update).Background
	}
	ss.last = q.push(&entry{session: session, update: u})
	if len(ss.pending) == 0 {
		q.touched = append(q.touched, ss)
	}
	ss.pending = append(ss.pending, ss.last)
}

// forget drops what the queue keeps of session once what is pending for
// it has been taken: nothing more will be queued for it.
func (q *controlQueue) forget(session string) {
	ss := q.sessions[session]
	switch {
	case ss == nil:
	case len(ss.pending) == 0:
		delete(q.sessions, session)
	default:
		ss.released = true
	}
}

// keepsFollowUp reports whether replacing pending (which followed a list
// prev) by next would move a removal that pending reported into an idle
// snapshot with an empty list; see controlQueue.
func keepsFollowUp(prev []acp.BackgroundItem, pending, next *acp.StateUpdate) bool {
	return next.State == acp.StateIdle && len(next.Background) == 0 && len(pending.Background) == 0 && len(prev) > 0
}

func (q *controlQueue) moveToEnd(e *entry) {
	q.remove(e)
	q.push(e)
}

func (q *controlQueue) remove(e *entry) {
	q.entries[e.index] = nil
	q.holes++
	if q.holes > 32 && q.holes*2 > len(q.entries) {
		q.entries = slices.DeleteFunc(q.entries, func(e *entry) bool { return e == nil })
		for i, e := range q.entries {
			e.index = i
		}
		q.holes = 0
	}
}

// take appends every pending entry to batch, in order, and empties the
// queue.
func (q *controlQueue) take(batch []*entry) []*entry {
	for _, e := range q.entries {
		if e == nil {
			continue
		}
		e.taken = true
		if e.stream != nil {
			e.stream.announced = true
		}
		if it := e.item; it != nil {
			if it.first == e {
				it.first = nil
			}
			if it.latest == e {
				it.latest = nil
			}
			if it.first == nil && it.latest == nil && (it.done || it.key.kind == terminalItem) {
				delete(q.items, it.key)
			}
		}
		batch = append(batch, e)
	}
	clear(q.entries)
	q.entries, q.holes = q.entries[:0], 0
	clear(q.finished)
	q.finished = q.finished[:0]
	clear(q.notices)
	q.notices = q.notices[:0]
	for _, ss := range q.touched {
		clear(ss.pending)
		ss.pending = ss.pending[:0]
		if ss.released || len(acp.StateOf(ss.last.update).Background) == 0 {
			// Its next state_update needs no earlier list: see keepsFollowUp.
			delete(q.sessions, ss.id)
		}
	}
	clear(q.touched)
	q.touched = q.touched[:0]
	return batch
}

// dropFinished drops the oldest finished items beyond keepFinished that
// the client never heard of, and returns the streams their dropped
// entries referred to.
func (q *controlQueue) dropFinished() []*stream {
	if !q.stalled {
		return nil
	}
	var streams []*stream
	for len(q.finished) > keepFinished {
		it := q.finished[0]
		q.finished = slices.Delete(q.finished, 0, 1)
		if !q.droppable(it) {
			continue
		}
		for _, e := range []*entry{it.first, it.latest} {
			if e == nil {
				continue
			}
			q.remove(e)
			if e.stream != nil && !slices.Contains(streams, e.stream) {
				streams = append(streams, e.stream)
			}
		}
		it.first, it.latest = nil, nil
		delete(q.items, it.key)
	}
	return streams
}

// droppable reports whether it can vanish without a trace: its first
// update is pending and nothing fixed or any pending state_update refers
// to it.
func (q *controlQueue) droppable(it *item) bool {
	if !it.fresh || it.first == nil || it.first.seq < q.lastFixed {
		return false
	}
	ss := q.sessions[it.key.session]
	if ss == nil {
		return true
	}
	for _, e := range ss.pending {
		if e.seq > it.first.seq && lists(acp.StateOf(e.update).Background, it.key) {
			return false
		}
	}
	return true
}

func lists(bg []acp.BackgroundItem, key itemKey) bool {
	for _, b := range bg {
		if key.kind == terminalItem && b.TerminalID == key.id || key.kind == toolCallItem && b.ToolCallID == key.id {
			return true
		}
	}
	return false
}

// clone returns a copy of a tool call or terminal update, the two kinds
// of update that merge patches; the others, which are never changed once
// queued, are returned as they are.
func clone(u acp.Update) acp.Update {
	switch u := u.(type) {
	case *acp.ToolCallUpdate:
		c := *u
		return &c
	case *acp.TerminalUpdate:
		c := *u
		return &c
	case *acp.Message, *acp.StateUpdate, *acp.Notice:
		return u
	}
	panic(fmt.Sprintf("clone: unknown update %T", u))
}

// merge applies the patch src to dst (acp.Merge).
func merge(dst, src acp.Update) { acp.Merge(dst, src) }
