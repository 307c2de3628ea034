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
// methods are safe for concurrent use. The appends (Create, Reopen,
// Meta, Update, Attach, Exit, Prompt, Forget, Sync, Closed) queue a record for
// the Store's writer and return at once (see the package doc for when
// one waits); they ignore a session the Store does not have. A
// terminal's output is not appended but read by the writer (Attach).
type Store struct {
	opts Options
	dir  string // Dir/sessions
	log  *slog.Logger

	mu       sync.Mutex
	index    map[string]*entry
	total    int64 // bytes of every indexed file
	queue    []op
	ctlBytes int              // records queued or being written, with opCost each
	skipped  map[string]int64 // files that could not be read, by id: their size then
	room     *sync.Cond       // signalled when ctlBytes goes down
	closing  bool

	wake chan struct{} // a record was queued
	done chan struct{} // the writer is gone

	// The writer's own.
	files map[string]*file
	buf   []byte // where it reads output (pull), maxChunk bytes

	syncs atomic.Int64 // fsyncs done, for tests
}

// hooks let tests see into the writer.
type hooks struct {
	batch        func()                 // called before each batch
	beforeRename func(tmp string) error // called before a compaction's rename; an error aborts it
}

// entry is an indexed session, under Store.mu.
type entry struct {
	info Info
	keys map[string]string // idempotencyKey → messageId
	live bool              // created or reopened here, and not closed since
}

// Open opens the history of opts.Dir, creating its directories, reads
// every file's index and starts the writer. A file it cannot read is
// skipped with one log line. With opts.Off it touches nothing.
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
		index: make(map[string]*entry), skipped: make(map[string]int64),
		files: make(map[string]*file),
		wake:  make(chan struct{}, 1), done: make(chan struct{}),
	}
	s.room = sync.NewCond(&s.mu)
	if opts.Off {
		close(s.done)
		return s, nil
	}
	if opts.Dir == "" {
		return nil, errors.New("open history: no state directory")
	}
	s.dir = filepath.Join(opts.Dir, "sessions")
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	if err := s.scan(); err != nil {
		return nil, fmt.Errorf("open history %s: %w", s.dir, err)
	}
	s.prune()
	go s.writer()
	return s, nil
}

// scan indexes every session file and removes what a compaction that
// did not finish left.
func (s *Store) scan() error {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, de := range des {
		name := de.Name()
		if isTemp(name) {
			// A compaction that died (not one of another process's that
			// runs now): the file it was for is whole.
			if fi, err := de.Info(); err == nil && time.Since(fi.ModTime()) > time.Minute {
				os.Remove(filepath.Join(s.dir, name)) // Best effort: it is ignored anyway.
			}
			continue
		}
		id, ok := idOf(name)
		if !ok || !de.Type().IsRegular() {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		p, err := readFile(filepath.Join(s.dir, name), id, s.opts.Scrollback, false)
		if err != nil {
			s.skip(id, fi.Size(), err)
			continue
		}
		s.index[id] = &entry{info: p.info, keys: p.keyMap()}
		s.total += p.info.Size
		s.files[id] = p.file(id)
	}
	return nil
}

// List returns every session of the history, the most recently updated
// first.
func (s *Store) List() []Info {
	s.mu.Lock()
	out := make([]Info, 0, len(s.index))
	for _, e := range s.index {
		out = append(out, e.info)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Info) int {
		return cmp.Or(b.UpdatedAt.Compare(a.UpdatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// Exists reports whether the history has session id.
func (s *Store) Exists(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.index[id] != nil
}

// Key returns the messageId of the prompt that session id accepted with
// idempotencyKey key, if it did.
func (s *Store) Key(id, key string) (messageID string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.index[id]; e != nil {
		messageID, ok = e.keys[key]
	}
	return messageID, ok
}

// Create starts the history of a new, live session. A history the Store
// already has under id is replaced: pick ids that do not exist.
func (s *Store) Create(id string, m Meta) error {
	if !validID(id) {
		return fmt.Errorf("create history of session %q: not a usable id", id)
	}
	s.enqueue(op{kind: opCreate, id: id, meta: m})
	return nil
}

// Reopen makes a past session live again: it is no longer closed, and
// is not pruned until it is closed again.
func (s *Store) Reopen(id string) { s.enqueue(op{kind: opOpen, id: id}) }

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

// Exit records terminal term's exit status, and is a durable point.
func (s *Store) Exit(id, term string, st acp.ExitStatus) {
	s.enqueue(op{kind: opExit, id: id, term: term, status: st})
}

// Prompt records that the session accepted a prompt with
// idempotencyKey key as message messageID. A prompt without a key is
// not recorded.
func (s *Store) Prompt(id, key, messageID string) {
	if key == "" {
		return
	}
	s.enqueue(op{kind: opPrompt, id: id, key: key, msgID: messageID})
}

// Sync is a durable point (a turn's end): what the session recorded so
// far is fsynced as soon as the writer gets to it.
func (s *Store) Sync(id string) { s.enqueue(op{kind: opSync, id: id}) }

// Closed records that the session was closed, and is a durable point.
// Its history stays, and may be pruned from now on.
func (s *Store) Closed(id string) { s.enqueue(op{kind: opClosed, id: id}) }

// Flush waits until everything queued so far is written and fsynced.
func (s *Store) Flush() error {
	done := make(chan error, 1)
	if !s.enqueue(op{kind: opBarrier, done: done}) {
		return nil
	}
	return <-done
}

// Refresh reads again the files that other processes changed, added or
// removed in the directory since Open (the sessions of a stdio agent
// beside a daemon), so that List and Load see them; the sessions live in
// this Store are its own and left alone. It waits for what is queued.
func (s *Store) Refresh() error {
	done := make(chan error, 1)
	if !s.enqueue(op{kind: opRefresh, done: done}) {
		return nil
	}
	return <-done
}

// Delete removes session id's history for good.
func (s *Store) Delete(id string) error {
	done := make(chan error, 1)
	if !s.enqueue(op{kind: opDelete, id: id, done: done}) {
		return fmt.Errorf("delete history of session %s: %w", id, ErrNotFound)
	}
	return <-done
}

// Load reads session id's history, once what is queued for it is
// written.
func (s *Store) Load(id string) (*History, error) {
	if !s.Exists(id) {
		return nil, fmt.Errorf("load history of session %s: %w", id, ErrNotFound)
	}
	if err := s.Flush(); err != nil {
		return nil, fmt.Errorf("load history of session %s: %w", id, err)
	}
	p, err := readFile(s.path(id), id, s.opts.Scrollback, true)
	if err != nil {
		return nil, fmt.Errorf("load history of session %s: %w", id, err)
	}
	return p.history(), nil
}

// Close writes and fsyncs what is queued and stops the writer. Appends
// after it are ignored.
func (s *Store) Close() error {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		s.room.Broadcast()
		s.signal()
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
	e := s.index[o.id]
	switch {
	case o.kind == opBarrier || o.kind == opRefresh:
	case o.kind == opCreate:
		if e != nil {
			s.total -= e.info.Size
		}
		e = &entry{info: Info{ID: o.id}, keys: make(map[string]string), live: true}
		s.index[o.id] = e
	case e == nil:
		return false
	}
	if e != nil {
		s.note(e, &o)
	}
	s.ctlBytes += cost
	s.queue = append(s.queue, o)
	s.signal()
	return true
}

// note applies o to the index.
func (s *Store) note(e *entry, o *op) {
	e.info.UpdatedAt = o.at
	switch o.kind {
	case opCreate, opMeta:
		e.info.Cwd, e.info.Title = o.meta.Cwd, o.meta.Title
	case opOpen:
		e.info.Closed, e.live = false, true
	case opClosed:
		e.info.Closed, e.live = true, false
	case opPrompt:
		e.keys[o.key] = o.msgID
	case opDelete:
		delete(s.index, o.id)
		s.total -= e.info.Size
	}
}

// signal wakes the writer.
func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Store) path(id string) string { return filepath.Join(s.dir, id+".jsonl") }

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
	id, ok := cutSuffix(name, ".jsonl")
	return id, ok && validID(id)
}

func cutSuffix(s, suffix string) (string, bool) {
	if len(s) < len(suffix) || s[len(s)-len(suffix):] != suffix {
		return s, false
	}
	return s[:len(s)-len(suffix)], true
}

// isTemp reports whether name is a compaction's temporary file.
func isTemp(name string) bool {
	_, ok := cutSuffix(name, ".tmp")
	return ok && len(name) > 0 && name[0] == '.'
}
