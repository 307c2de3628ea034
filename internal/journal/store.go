package journal

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"shellagent/acp"
)

// Defaults of Options.
const (
	DefaultMax        = 256 << 20
	DefaultScrollback = 1 << 20
	DefaultQueue      = 8 << 20
	DefaultCompactAt  = 4 << 20
)

// syncEvery is the longest a written record waits for its fsync.
const syncEvery = time.Second

// createWait bounds how long Create waits for a new session's file: on
// a disk that hangs, the session goes on and its file follows.
const createWait = 2 * time.Second

// maxChunk is the most output one out record holds.
const maxChunk = 64 << 10

// opCost is what a queued record costs beside its bytes, so that a
// flood of tiny chunks is bounded too.
const opCost = 160

// ErrNotFound is the error of Load and Delete for a session the Store
// does not have.
var ErrNotFound = errors.New("no such session in the history")

// Options configure a Store. The zero value of each field is its default.
type Options struct {
	Dir        string       // the state directory; sessions go in Dir/sessions
	Off        bool         // keep nothing: every append is a no-op, List is empty
	Max        int64        // bytes of history in all (DefaultMax)
	Scrollback int          // bytes of output kept per terminal (DefaultScrollback)
	Queue      int          // bytes of records queued at most (DefaultQueue); output is read, never queued (Attach)
	CompactAt  int64        // bytes a file may hold that it no longer needs (DefaultCompactAt)
	Log        *slog.Logger // where the Store reports what it skips and fails (slog.Default())

	hooks *hooks
}

// Meta is what a session is listed with besides its id.
type Meta struct {
	Cwd   string
	Title string
}

// Info is one session of List.
type Info struct {
	ID        string
	Cwd       string
	Title     string
	UpdatedAt time.Time // the last record's time
	Closed    bool      // closed, and not made live again since
	Size      int64     // bytes of its file
	Elsewhere bool      // live in another process that shares the directory (as of Open or the last Refresh)
}

// DefaultDir returns the default state directory:
// $XDG_STATE_HOME/shellagent, else ~/.local/state/shellagent.
func DefaultDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "shellagent"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "shellagent"), nil
}

// A Store keeps the history of every session of a state directory. Its
// methods are safe for concurrent use. The appends (Create, Meta, Update,
// Attach, Exit, Prompt, Config, Forget, Sync, Closed) queue a record for
// the Store's writer and return at once (see the package doc for when
// one waits); they ignore a session the Store does not have. A
// terminal's output is not appended but read by the writer (Attach).
//
// The Store's index (what List, Exists and Stat answer from) holds what
// List shows of each session, read from the head and the tail of its
// file; a session is read in full only to be loaded, made live again
// (but by Adopt, from what Handover handed over), compacted or written
// to.
type Store struct {
	opts Options
	log  *slog.Logger
	w    *writer // the writer's own state

	mu       sync.Mutex
	idx      index
	queue    []op
	ctlBytes int        // records queued or being written, with opCost each
	room     *sync.Cond // signalled when ctlBytes goes down
	closing  bool

	wake nudge         // a record was queued, or output was written (Tap.Wrote)
	done chan struct{} // the writer is gone

	// stalled is set when a bounded wait (await) timed out, and cleared
	// once the writer has written a batch: while it is set, bounded
	// waits do not wait, so a disk that hangs costs each session one
	// bound, not one per record.
	stalled atomic.Bool
}

// hooks let tests see into the writer.
type hooks struct {
	batch        func()                              // called before each batch
	beforeRename func(tmp string) error              // called before a compaction's rename; an error aborts it
	open         func(path string) (source, error)   // opens a file for the index (os.Open)
	settle       *time.Duration                      // pruneSettle
	now          func() time.Time                    // the writer's clock for its retries (time.Now)
	write        func(*os.File, []byte) (int, error) // writes a file's lines (File.Write)
}

// Open opens the history of opts.Dir, creating its directories, reads
// what List shows of every session (each file's header and tail) and
// starts the writer. A file it cannot read is skipped with one log line.
// With opts.Off it touches nothing.
func Open(opts Options) (*Store, error) {
	if opts.Max <= 0 {
		opts.Max = DefaultMax
	}
	if opts.Scrollback <= 0 {
		opts.Scrollback = DefaultScrollback
	}
	if opts.Queue <= 0 {
		opts.Queue = DefaultQueue
	}
	if opts.CompactAt <= 0 {
		opts.CompactAt = DefaultCompactAt
	}
	s := &Store{
		opts: opts, log: cmp.Or(opts.Log, slog.Default()),
		wake: make(nudge, 1), done: make(chan struct{}),
	}
	s.room = sync.NewCond(&s.mu)
	if opts.Off {
		close(s.done)
		return s, nil
	}
	if opts.Dir == "" {
		return nil, errors.New("open history: no state directory")
	}
	s.idx = newIndex(filepath.Join(opts.Dir, "sessions"))
	if err := os.MkdirAll(s.idx.dir, 0o700); err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	s.w = newWriter(s)
	if err := s.w.rescan(true); err != nil {
		return nil, fmt.Errorf("open history %s: %w", s.idx.dir, err)
	}
	s.w.prune()
	go s.w.run()
	return s, nil
}

// List returns every session of the history, the most recently updated
// first.
func (s *Store) List() []Info {
	s.mu.Lock()
	out := s.idx.list()
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Info) int {
		return cmp.Or(b.UpdatedAt.Compare(a.UpdatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// Exists reports whether the history has session id.
func (s *Store) Exists(id string) bool {
	_, ok := s.Stat(id)
	return ok
}

// Stat returns what List shows of session id, if the history has it.
func (s *Store) Stat(id string) (Info, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.idx.entries[id]; e != nil {
		return e.info, true
	}
	return Info{}, false
}

// Create starts the history of a new, live session. A history the Store
// already has under id is replaced, unless another process has it live:
// pick ids that do not exist. It returns once the session's file is on
// disk (fsynced, with its cwd), so that a session whose creation was
// answered can be resumed even if this process dies right after, or
// after createWait with the file still to come; it returns the error of
// a file that cannot be created.
func (s *Store) Create(id string, m Meta) error {
	if !validID(id) {
		return fmt.Errorf("create history of session %q: not a usable id", id)
	}
	if err := s.await(op{kind: opCreate, id: id, meta: m}, createWait); err != nil {
		return fmt.Errorf("create history of session %s: %w", id, err)
	}
	return nil
}

// Reopen makes a past session live again in this process, and returns
// its history (as Load does): it is no longer closed, and is not pruned
// until it is closed again. It is ErrLive (wrapped) when another process
// that shares the directory has the session live, ErrNotFound when
// the history does not have it, and a *CorruptError (wrapped; ErrCorrupt)
// when its file is corrupt: the session is skipped then, no longer listed.
func (s *Store) Reopen(id string) (*History, error) {
	p, err := reopen(s, id, nil, keepAll)
	if err != nil {
		return nil, err
	}
	return p.history(), nil
}

// reopen makes session id live again in s (Reopen, Adopt) and returns what
// the writer needs of its file: from h, if it describes the file as it
// is, else read from the file, keeping what keep says.
func reopen(s *Store, id string, h *Handed, keep keeping) (*parsed, error) {
	if s.opts.Off {
		return nil, fmt.Errorf("reopen history of session %s: %w", id, ErrNotFound)
	}
	if !s.Exists(id) {
		return nil, fmt.Errorf("reopen history of session %s: %w", id, ErrNotFound)
	}
	// What is queued is written first: a file being created, a close
	// that drops the lock.
	if err := s.Flush(); err != nil {
		return nil, fmt.Errorf("reopen history of session %s: %w", id, err)
	}
	s.mu.Lock()
	held := s.idx.locks[id] != nil
	s.mu.Unlock()
	if !held {
		lock, err := lockFile(s.idx.path(id))
		if notExist(err) {
			err = ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("reopen history of session %s: %w", id, err)
		}
		s.mu.Lock()
		if s.idx.locks[id] == nil {
			s.idx.locks[id] = lock
			lock = nil
		}
		s.mu.Unlock()
		if lock != nil {
			lock.Close() // Best effort: another goroutine locked it first.
		}
	}
	release := func() { // the lock, unless the session is live here
		s.mu.Lock()
		defer s.mu.Unlock()
		s.idx.release(id)
	}
	var p *parsed
	if h != nil && keep == keepSizes {
		p = handed(s.idx.path(id), id, h) // locked: no other process changes it now
	}
	if p == nil {
		var err error
		if p, err = readWith(s.w.open, s.idx.path(id), id, s.opts.Scrollback, keep); err != nil {
			release()
			skipCorrupt(s, id, err)
			return nil, fmt.Errorf("reopen history of session %s: %w", id, err)
		}
	}
	if !s.enqueue(op{kind: opOpen, id: id, parsed: p}) {
		release()
		return nil, fmt.Errorf("reopen history of session %s: %w", id, ErrNotFound)
	}
	return p, nil
}

// skipCorrupt skips the file of session id of s if err, of reading it
// whole, says it is corrupt: the index read only its head and tail, and
// so listed it until now. It is no longer listed, and logged once; the
// file is set aside (err's Aside says where).
func skipCorrupt(s *Store, id string, err error) {
	if ce := (*CorruptError)(nil); errors.As(err, &ce) {
		ce.Aside = skipFile(s, id, ce.size, err)
	}
}

// Meta records the session's cwd and title.
func (s *Store) Meta(id string, m Meta) { s.enqueue(op{kind: opMeta, id: id, meta: m}) }

// Update records a session/update's update. With item "", it is kept
// as one more update (a message); otherwise it is the state of the item
// (a tool call or terminal id) from now on, replayed at the place of
// the item's first update.
func (s *Store) Update(id, item string, u acp.Update) {
	if s.opts.Off {
		return
	}
	b, err := json.Marshal(u)
	if err != nil {
		s.log.Warn("history: cannot encode an update", "session", id, "err", err)
		return
	}
	s.enqueue(op{kind: opUpdate, id: id, item: item, data: b})
}

// Forget drops an item from the history (retired work): its updates,
// and the output and exit of the terminal of the same id.
func (s *Store) Forget(id, item string) { s.enqueue(op{kind: opForget, id: id, item: item}) }

// Exit records terminal term's exit status, and is a durable point. It
// returns once the record is written (with the terminal's output before
// it; the fsync follows), at most 2 s on a disk that hangs, so that a
// client that reads the exit status never sees the next process after
// this one is killed tell another one ({}, not recorded).
func (s *Store) Exit(id, term string, st acp.ExitStatus) {
	s.await(op{kind: opExit, id: id, term: term, status: st}, createWait) // Safe: the writer answers it nil.
}

// Prompt records that the session accepted a prompt with
// idempotencyKey key as message messageID, and returns once the record
// is written (not fsynced; at most 2 s on a disk that hangs), so that
// the answer that follows it never reaches a client whose retry, after
// this process is killed, the next one would run again. A prompt
// without a key is not recorded.
func (s *Store) Prompt(id, key, messageID string) {
	if key == "" {
		return
	}
	s.await(op{kind: opPrompt, id: id, key: key, msgID: messageID}, createWait) // Safe: the writer answers it nil.
}

// Reserve records that session id may show ids up to ids[prefix] of
// each prefix, and returns once the record is written (not fsynced): a
// session made live again after its process was killed issues ids above
// them (History.IDs), never one a client may have seen although no
// other record holds it. On a disk that hangs it returns after
// createWait.
func (s *Store) Reserve(id string, ids map[string]int) {
	s.await(op{kind: opIDs, id: id, ids: ids}, createWait) // Safe: the writer answers it nil.
}

// Config records that the session's config option option has value
// from now on (session/set_config_option), and returns once the record is
// written, as Prompt does: the answer that follows it never tells a
// client a value that the next process, after this one is killed, does
// not have.
func (s *Store) Config(id, option, value string) {
	s.await(op{kind: opConfig, id: id, key: option, msgID: value}, createWait) // Safe: the writer answers it nil.
}

// Sync is a durable point (a turn's end): what the session recorded so
// far is fsynced as soon as the writer gets to it.
func (s *Store) Sync(id string) { s.enqueue(op{kind: opSync, id: id}) }

// Closed records that the session was closed, and is a durable point.
// Its history stays, and may be pruned from now on; the process no
// longer holds it live.
func (s *Store) Closed(id string) { s.enqueue(op{kind: opClosed, id: id}) }

// Flush waits until everything queued so far is written and fsynced.
func (s *Store) Flush() error { return s.await(op{kind: opBarrier}, 0) }

// Written waits until everything queued so far is written, but not
// fsynced: another process that reads the files then reads all of it,
// from the page cache. For the next image of an upgrade in place, which
// reopens the files (Reopen, a durable point: their first batch there
// fsyncs them), so that the hold of the upgrade does not wait for the
// disk.
func (s *Store) Written() error { return s.await(op{kind: opWritten}, 0) }

// await queues o, which the writer answers, and waits for its answer:
// with bound > 0, at most bound, then nil. A record that is not queued
// (history off, the Store closing, a session it does not have) is nil.
func (s *Store) await(o op, bound time.Duration) error {
	done := make(chan error, 1)
	o.done = done
	if !s.enqueue(o) {
		return nil
	}
	if bound <= 0 {
		return <-done
	}
	if s.stalled.Load() {
		return nil
	}
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		s.stalled.Store(true)
		return nil
	}
}

// Refresh reads again the files that other processes changed, added or
// removed in the directory since Open (the sessions of a stdio agent
// beside a daemon), so that List and Load see them, and which of them
// another process has live; the sessions live in this Store are its own
// and left alone. It waits for what is queued.
func (s *Store) Refresh() error {
	done := make(chan error, 1)
	if !s.enqueue(op{kind: opRefresh, done: done}) {
		return nil
	}
	return <-done
}

// Delete removes session id's history for good, and its corrupt file
// set aside (SetAside) if it has one. It is ErrLive (wrapped) when
// another process has the session live, ErrNotFound when there is
// neither.
func (s *Store) Delete(id string) error {
	done := make(chan error, 1)
	if !s.enqueue(op{kind: opDelete, id: id, done: done}) {
		return fmt.Errorf("delete history of session %s: %w", id, ErrNotFound)
	}
	return <-done
}

// Load reads session id's history, once what is queued for it is
// written. A corrupt file is skipped, as Reopen skips it.
func (s *Store) Load(id string) (*History, error) {
	if !s.Exists(id) {
		return nil, fmt.Errorf("load history of session %s: %w", id, ErrNotFound)
	}
	if err := s.Flush(); err != nil {
		return nil, fmt.Errorf("load history of session %s: %w", id, err)
	}
	p, err := readFile(s.idx.path(id), id, s.opts.Scrollback, keepAll)
	if err != nil {
		skipCorrupt(s, id, err)
		return nil, fmt.Errorf("load history of session %s: %w", id, err)
	}
	return p.history(), nil
}

// Close writes and fsyncs what is queued, stops the writer and drops
// the locks of the sessions live here. Appends after it are ignored.
func (s *Store) Close() error {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		s.room.Broadcast()
		s.wake.poke()
	}
	s.mu.Unlock()
	<-s.done
	return nil
}

// enqueue queues a record that is not output, waiting while the queue
// holds Options.Queue bytes of them. It reports whether it was queued.
func (s *Store) enqueue(o op) bool {
	if s.opts.Off {
		return false
	}
	o.at = time.Now()
	cost := len(o.data) + opCost
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.ctlBytes > 0 && s.ctlBytes+cost > s.opts.Queue && !s.closing {
		s.room.Wait()
	}
	if s.closing {
		return false
	}
	if !s.idx.note(&o) {
		return false
	}
	s.ctlBytes += cost
	s.queue = append(s.queue, o)
	s.wake.poke()
	return true
}

// A nudge is a wake-up for the writer: poke never blocks, and many pokes
// before the writer looks are one.
type nudge chan struct{}

func (n nudge) poke() {
	select {
	case n <- struct{}{}:
	default:
	}
}

// validID reports whether id can name a file: letters, digits, '_',
// '-' and '.', not first.
func validID(id string) bool {
	if id == "" || len(id) > 200 || id[0] == '.' {
		return false
	}
	for _, c := range []byte(id) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
		if !ok {
			return false
		}
	}
	return true
}

// idOf returns the session id of a file name.
func idOf(name string) (string, bool) {
	id, ok := strings.CutSuffix(name, ".jsonl")
	return id, ok && validID(id)
}

// asideOf returns the session id of the name of a corrupt file set aside.
func asideOf(name string) (string, bool) {
	jsonl, ok := strings.CutSuffix(name, SetAside)
	if !ok {
		return "", false
	}
	return idOf(jsonl)
}

// isTemp reports whether name is a temporary file of a creation or a
// compaction.
func isTemp(name string) bool {
	return strings.HasSuffix(name, ".tmp") && strings.HasPrefix(name, ".")
}
