package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"shellagent/acp"
	"shellagent/internal/testloop"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open opens a Store on dir that the test closes.
func open(t testing.TB, o Options) *Store {
	t.Helper()
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func msg(kind, id, text string) *acp.Message {
	return &acp.Message{SessionUpdate: kind, MessageID: id, Content: []acp.ContentBlock{acp.TextBlock(text)}}
}

func call(id, status string) *acp.ToolCallUpdate {
	return &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: id, Status: status}
}

func code(n int) *acp.ExitStatus { return &acp.ExitStatus{ExitCode: &n} }

// want is what a test expects Load to return, in a form that compares.
type want struct {
	cwd, title string
	closed     bool
	updates    []string // each "item=json"
	terms      map[string]string
	written    map[string]int64
	exits      map[string]*acp.ExitStatus
}

// String shows w with its exit statuses' values.
func (w want) String() string {
	ex := map[string]string{}
	for id, e := range w.exits {
		b, _ := json.Marshal(e)
		ex[id] = string(b)
	}
	return fmt.Sprint(w.cwd, w.title, w.closed, w.updates, w.terms, w.written, ex)
}

func summary(h *History) want {
	w := want{cwd: h.Cwd, title: h.Title, closed: h.Closed, terms: map[string]string{}, written: map[string]int64{}, exits: map[string]*acp.ExitStatus{}}
	for _, it := range h.Updates {
		w.updates = append(w.updates, it.Item+"="+string(it.Update))
	}
	for id, o := range h.Terminals {
		w.terms[id], w.written[id] = string(o.Data), o.Written
		if o.Exit != nil {
			w.exits[id] = o.Exit
		}
	}
	return w
}

func js(u acp.Update) string {
	b, _ := json.Marshal(u)
	return string(b)
}

func check(t *testing.T, got *History, w want) {
	t.Helper()
	g := summary(got)
	if g.cwd != w.cwd || g.title != w.title || g.closed != w.closed {
		t.Errorf("info: got cwd %q title %q closed %v, want %q %q %v", g.cwd, g.title, g.closed, w.cwd, w.title, w.closed)
	}
	if !slices.Equal(g.updates, w.updates) {
		t.Errorf("updates:\n got %q\nwant %q", g.updates, w.updates)
	}
	for id, d := range w.terms {
		if g.terms[id] != d {
			t.Errorf("terminal %s output: got %q, want %q", id, g.terms[id], d)
		}
		if w.written != nil && g.written[id] != w.written[id] {
			t.Errorf("terminal %s written: got %d, want %d", id, g.written[id], w.written[id])
		}
	}
	if len(g.terms) != len(w.terms) {
		t.Errorf("terminals: got %v, want %v", g.terms, w.terms)
	}
	for id, e := range w.exits {
		if ge := g.exits[id]; ge == nil || fmt.Sprint(*ge.ExitCode) != fmt.Sprint(*e.ExitCode) {
			t.Errorf("terminal %s exit: got %+v, want %+v", id, ge, e)
		}
	}
	if len(g.exits) != len(w.exits) {
		t.Errorf("exits: got %d, want %d", len(g.exits), len(w.exits))
	}
}

// TestRoundTrip: what a session records, a fresh Store on the same
// directory loads.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	m1, m2 := msg(acp.KindUserMessage, "msg_1", "ls"), msg(acp.KindAgentMessage, "msg_2", "ok")
	c1, c1b := call("call_1", "in_progress"), call("call_1", "completed")
	tests := []struct {
		name   string
		record func(s *Store, id string)
		want   want
	}{
		{"messages in order", func(s *Store, id string) {
			s.Update(id, "", m1)
			s.Update(id, "", m2)
		}, want{cwd: "/p", updates: []string{"=" + js(m1), "=" + js(m2)}}},
		{"an item at its first place with its last state", func(s *Store, id string) {
			s.Update(id, "", m1)
			s.Update(id, "call_1", c1)
			s.Update(id, "", m2)
			s.Update(id, "call_1", c1b)
		}, want{cwd: "/p", updates: []string{"=" + js(m1), "call_1=" + js(c1b), "=" + js(m2)}}},
		{"output and exit", func(s *Store, id string) {
			output(s, id, "term_1", []byte("hello "))
			output(s, id, "term_2", []byte("other"))
			output(s, id, "term_1", []byte("world\n"))
			s.Exit(id, "term_1", *code(3))
		}, want{cwd: "/p", terms: map[string]string{"term_1": "hello world\n", "term_2": "other"},
			written: map[string]int64{"term_1": 12, "term_2": 5}, exits: map[string]*acp.ExitStatus{"term_1": code(3)}}},
		{"meta, closed and reopened", func(s *Store, id string) {
			s.Meta(id, Meta{Cwd: "/q", Title: "make test"})
			s.Closed(id)
			s.Reopen(id)
		}, want{cwd: "/q", title: "make test"}},
		{"forgotten work is gone", func(s *Store, id string) {
			s.Update(id, "", m1)
			s.Update(id, "call_1", c1)
			s.Update(id, "term_1", &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: "term_1"})
			output(s, id, "term_1", []byte("gone"))
			s.Exit(id, "term_1", *code(0))
			output(s, id, "term_2", []byte("kept"))
			s.Forget(id, "term_1")
			s.Forget(id, "call_1")
			s.Update(id, "", m2)
		}, want{cwd: "/p", updates: []string{"=" + js(m1), "=" + js(m2)}, terms: map[string]string{"term_2": "kept"}}},
		{"closed", func(s *Store, id string) {
			s.Meta(id, Meta{Cwd: "/q", Title: "t"})
			s.Closed(id)
		}, want{cwd: "/q", title: "t", closed: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := open(t, Options{Dir: dir})
			if err := s.Create("sess_1", Meta{Cwd: "/p"}); err != nil {
				t.Fatal(err)
			}
			tt.record(s, "sess_1")
			live, err := s.Load("sess_1")
			if err != nil {
				t.Fatal(err)
			}
			check(t, live, tt.want)
			s.Close()

			s2 := open(t, Options{Dir: dir})
			h, err := s2.Load("sess_1")
			if err != nil {
				t.Fatal(err)
			}
			check(t, h, tt.want)
			if l := s2.List(); len(l) != 1 || l[0].Cwd != tt.want.cwd || l[0].Closed != tt.want.closed || l[0].Size == 0 {
				t.Errorf("List: %+v", l)
			}
			fi, err := os.Stat(filepath.Join(dir, "sessions", "sess_1.jsonl"))
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("file mode: %v %v", fi.Mode(), err)
			}
			di, err := os.Stat(filepath.Join(dir, "sessions"))
			if err != nil || di.Mode().Perm() != 0o700 {
				t.Errorf("dir mode: %v %v", di.Mode(), err)
			}
		})
	}
}

// TestListNewestFirst: List orders by updatedAt, the newest first.
func TestListNewestFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	for _, id := range []string{"sess_a", "sess_b", "sess_c"} {
		s.Create(id, Meta{Cwd: "/" + id})
		time.Sleep(5 * time.Millisecond)
	}
	s.Update("sess_a", "", msg(acp.KindUserMessage, "msg_1", "x"))
	s.Close()
	s2 := open(t, Options{Dir: dir})
	var ids []string
	for _, i := range s2.List() {
		ids = append(ids, i.ID)
	}
	if want := []string{"sess_a", "sess_c", "sess_b"}; !slices.Equal(ids, want) {
		t.Errorf("List order: got %v, want %v", ids, want)
	}
}

// logCount is a slog handler that counts its records.
type logCount struct {
	mu    sync.Mutex
	lines []string
}

func (l *logCount) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, string(p))
		return len(p), nil
	}), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func (l *logCount) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// writeGood records a session with one message and some output, and
// closes the store.
func writeGood(t *testing.T, dir, id string) {
	t.Helper()
	s := open(t, Options{Dir: dir})
	s.Create(id, Meta{Cwd: "/p"})
	s.Update(id, "", msg(acp.KindUserMessage, "msg_1", "one"))
	output(s, id, "term_1", []byte("out"))
	s.Update(id, "", msg(acp.KindUserMessage, "msg_2", "two"))
	s.Close()
}

// TestTornLastLine: a last line without its newline is dropped on load
// and cut off before the file is written again.
func TestTornLastLine(t *testing.T) {
	t.Parallel()
	for _, torn := range []string{`{"t":"update","u":{"sessionUpd`, `{"t":"closed"}`, `x`} {
		t.Run(torn, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeGood(t, dir, "sess_1")
			path := filepath.Join(dir, "sessions", "sess_1.jsonl")
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(torn)
			f.Close()

			var logs logCount
			s := open(t, Options{Dir: dir, Log: logs.logger()})
			h, err := s.Load("sess_1")
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Updates) != 2 || h.Closed || string(h.Terminals["term_1"].Data) != "out" {
				t.Fatalf("load: %+v", summary(h))
			}
			if _, err := s.Reopen("sess_1"); err != nil {
				t.Fatal(err)
			}
			s.Update("sess_1", "", msg(acp.KindAgentMessage, "msg_3", "three"))
			s.Close()
			if logs.count() != 0 {
				t.Errorf("a torn line was logged: %q", logs.lines)
			}
			s2 := open(t, Options{Dir: dir, Log: logs.logger()})
			h, err = s2.Load("sess_1")
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Updates) != 3 {
				t.Errorf("after appending past a torn line: %d updates, want 3", len(h.Updates))
			}
			if logs.count() != 0 {
				t.Errorf("the file went corrupt: %q", logs.lines)
			}
		})
	}
}

// TestCorruptFileSkipped: a corrupt file is skipped with one log line,
// set aside as it is, and the others load; the next Open neither lists
// nor logs it, and Delete removes it. A newer version's file is skipped
// but left in place, for a newer build.
func TestCorruptFileSkipped(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		corrupt func(b []byte) []byte
	}{
		{"bad JSON in the middle", func(b []byte) []byte {
			i := bytes.IndexByte(b, '\n')
			return slices.Concat(b[:i+1], []byte("{not json\n"), b[i+1:])
		}},
		{"bad out data", func(b []byte) []byte {
			return append(b, `{"t":"out","term":"term_1","d":"!!!"}`+"\n"...)
		}},
		{"no header", func(b []byte) []byte { return b[bytes.IndexByte(b, '\n')+1:] }},
		{"header of another session", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"id":"sess_bad"`), []byte(`"id":"sess_other"`), 1)
		}},
		{"a newer version", func(b []byte) []byte { return bytes.Replace(b, []byte(`"v":1`), []byte(`"v":2`), 1) }},
		{"empty", func([]byte) []byte { return nil }},
		{"binary", func([]byte) []byte { return []byte("\x00\x01\x02\n") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeGood(t, dir, "sess_good")
			writeGood(t, dir, "sess_bad")
			path := filepath.Join(dir, "sessions", "sess_bad.jsonl")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			bad := tt.corrupt(b)
			if err := os.WriteFile(path, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			var logs logCount
			s := open(t, Options{Dir: dir, Log: logs.logger()})
			if l := s.List(); len(l) != 1 || l[0].ID != "sess_good" {
				t.Errorf("List: %+v", l)
			}
			if _, err := s.Load("sess_good"); err != nil {
				t.Error(err)
			}
			if _, err := s.Load("sess_bad"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Load of the corrupt session: %v", err)
			}
			s.Close()
			if n := logs.count(); n != 1 || !strings.Contains(logs.lines[0], "sess_bad.jsonl") {
				t.Errorf("log lines: %q, want one naming the file", logs.lines)
			}
			newer := tt.name == "a newer version"
			aside := path + SetAside
			if newer {
				aside = path
			}
			if got, err := os.ReadFile(aside); err != nil || !bytes.Equal(got, bad) {
				t.Errorf("the corrupt file was changed: %v", err)
			}
			if _, err := os.Stat(path); !newer && !os.IsNotExist(err) {
				t.Errorf("the corrupt file is still in place: %v", err)
			}
			if newer {
				return
			}
			var again logCount
			s = open(t, Options{Dir: dir, Log: again.logger()})
			if l := s.List(); len(l) != 1 || l[0].ID != "sess_good" {
				t.Errorf("List after Open again: %+v", l)
			}
			if n := again.count(); n != 0 {
				t.Errorf("log lines after Open again: %q, want none", again.lines)
			}
			if err := s.Delete("sess_bad"); err != nil {
				t.Errorf("Delete of the session set aside: %v", err)
			}
			if _, err := os.Stat(aside); !os.IsNotExist(err) {
				t.Errorf("the file set aside is still there after Delete: %v", err)
			}
			if err := s.Delete("sess_bad"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Delete again: %v, want ErrNotFound", err)
			}
		})
	}
}

// TestCorruptBeforeTheLastMark: a corrupt line that the index does not
// read (before the file's last mark) is found by Reopen, which sets the
// file aside: the next Open neither lists nor logs it. Before, the index
// listed it again at each Open, and logged it again at each Reopen.
func TestCorruptBeforeTheLastMark(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeGood(t, dir, "sess_mid")
	path := filepath.Join(dir, "sessions", "sess_mid.jsonl")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.IndexByte(b, '\n')
	bad := slices.Concat(b[:i+1], []byte("{not json\n"), b[i+1:], []byte(`{"t":"mark","cwd":"/p","title":"mid"}`+"\n"))
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs logCount
	s := open(t, Options{Dir: dir, Log: logs.logger()})
	if !s.Exists("sess_mid") {
		t.Fatal("not listed before it is read whole")
	}
	_, err = s.Reopen("sess_mid")
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Aside != path+SetAside {
		t.Fatalf("Reopen: %v, want a *CorruptError set aside as %s", err, path+SetAside)
	}
	if s.Exists("sess_mid") || logs.count() != 1 {
		t.Errorf("after Reopen: listed %v, log lines %q, want not listed and one", s.Exists("sess_mid"), logs.lines)
	}
	s.Close()
	var again logCount
	s = open(t, Options{Dir: dir, Log: again.logger()})
	if s.Exists("sess_mid") || again.count() != 0 {
		t.Errorf("after Open again: listed %v, log lines %q, want neither", s.Exists("sess_mid"), again.lines)
	}
	if got, _ := os.ReadFile(path + SetAside); !bytes.Equal(got, bad) {
		t.Error("the corrupt file was changed")
	}
}

// TestPruneSetAsideFirst: a corrupt file set aside counts in Max, and
// goes before any session when the history is pruned.
func TestPruneSetAsideFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeGood(t, dir, "sess_old")
	s := open(t, Options{Dir: dir})
	s.Reopen("sess_old")
	s.Closed("sess_old")
	s.Close()
	good, err := os.Stat(filepath.Join(dir, "sessions", "sess_old.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	aside := filepath.Join(dir, "sessions", "sess_bad.jsonl"+SetAside)
	if err := os.WriteFile(aside, bytes.Repeat([]byte("junk\n"), 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs logCount
	s = open(t, Options{Dir: dir, Max: good.Size() + 100, Log: logs.infoLogger()})
	if _, err := os.Stat(aside); !os.IsNotExist(err) {
		t.Errorf("the file set aside is still there, over Max: %v", err)
	}
	if !s.Exists("sess_old") {
		t.Error("the closed session was pruned before the file set aside")
	}
	if logs.count() != 1 || !strings.Contains(logs.lines[0], "set aside") {
		t.Errorf("log lines: %q, want one of the file set aside pruned", logs.lines)
	}
}

// TestCompaction: once the output beyond the scrollback passes the
// threshold, the file is rewritten with exactly each terminal's last
// Scrollback bytes, through a fsynced temp file renamed over it.
func TestCompaction(t *testing.T) {
	t.Parallel()
	const scroll = 1000
	dir := t.TempDir()
	var renames int
	var mu sync.Mutex
	var failNext bool
	path := filepath.Join(dir, "sessions", "sess_1.jsonl")
	hk := &hooks{beforeRename: func(tmp string) error {
		mu.Lock()
		defer mu.Unlock()
		renames++
		// Killed here: the old file is whole, and the temp file too.
		if filepath.Dir(tmp) != filepath.Dir(path) {
			t.Errorf("temp file %s not beside %s", tmp, path)
		}
		old, err := readFile(path, "sess_1", scroll, keepAll)
		if err != nil {
			t.Errorf("the old file before the rename: %v", err)
		}
		nf, err := readFile(tmp, "sess_1", scroll, keepAll)
		if err != nil {
			t.Errorf("the temp file before the rename: %v", err)
		}
		if err == nil && old != nil {
			if o, n := summary(old.history()), summary(nf.history()); fmt.Sprint(o) != fmt.Sprint(n) {
				t.Errorf("the temp file holds another history:\n old %v\n new %v", o, n)
			}
			if old.info.Size <= nf.info.Size {
				t.Errorf("compacting %d bytes into %d", old.info.Size, nf.info.Size)
			}
		}
		if failNext {
			failNext = false
			return errors.New("killed")
		}
		return nil
	}}
	s := open(t, Options{Dir: dir, Scrollback: scroll, CompactAt: 4096, hooks: hk, Log: slog.New(slog.DiscardHandler)})
	s.Create("sess_1", Meta{Cwd: "/p"})
	m := msg(acp.KindUserMessage, "msg_1", "x")
	s.Update("sess_1", "", m)
	var all1 []byte
	for i := range 400 {
		c1 := fmt.Appendf(nil, "a%05d|", i)
		c2 := fmt.Appendf(nil, "b%05d/", i)
		all1 = append(all1, c1...)
		output(s, "sess_1", "term_1", c1)
		if i%2 == 0 {
			output(s, "sess_1", "term_2", c2)
		}
		s.Update("sess_1", "call_1", call("call_1", "in_progress"))
		if i%50 == 0 {
			s.Flush()
		}
	}
	s.Exit("sess_1", "term_1", *code(0))
	s.Flush()
	var want2 []byte
	for i := 0; i < 400; i += 2 {
		want2 = fmt.Appendf(want2, "b%05d/", i)
	}
	w := want{cwd: "/p", updates: []string{"=" + js(m), "call_1=" + js(call("call_1", "in_progress"))},
		terms:   map[string]string{"term_1": string(all1[len(all1)-scroll:]), "term_2": string(want2[len(want2)-scroll:])},
		written: map[string]int64{"term_1": int64(len(all1)), "term_2": int64(len(want2))},
		exits:   map[string]*acp.ExitStatus{"term_1": code(0)}}
	h, err := s.Load("sess_1")
	if err != nil {
		t.Fatal(err)
	}
	check(t, h, w)
	mu.Lock()
	if renames == 0 {
		t.Error("never compacted")
	}
	failNext = true
	mu.Unlock()
	fi, _ := os.Stat(path)
	if fi.Size() > 4*4096+2*scroll*4/3 {
		t.Errorf("file is %d bytes after compaction", fi.Size())
	}
	// A compaction that dies before its rename leaves the old file.
	for i := range 1000 {
		output(s, "sess_1", "term_1", fmt.Appendf(nil, "c%05d|", i))
		all1 = fmt.Appendf(all1, "c%05d|", i)
		if i%100 == 99 {
			s.Flush() // batches within the scrollback: a batch beyond it is cut before it is written
		}
	}
	s.Flush()
	s.Close()
	if failNext {
		t.Error("the compaction to kill did not happen")
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "sessions"))
	if len(ents) != 1 {
		t.Errorf("files left: %v", ents)
	}
	// A temp file that a killed writer left is removed at Open.
	stray := filepath.Join(dir, "sessions", ".sess_1.123.tmp")
	os.WriteFile(stray, []byte(`{"t":"sess`), 0o600)
	old := time.Now().Add(-2 * time.Minute)
	os.Chtimes(stray, old, old)
	s2 := open(t, Options{Dir: dir, Scrollback: scroll})
	h, err = s2.Load("sess_1")
	if err != nil {
		t.Fatal(err)
	}
	w.terms["term_1"], w.written["term_1"] = string(all1[len(all1)-scroll:]), int64(len(all1))
	check(t, h, w)
	if ents, _ := os.ReadDir(filepath.Join(dir, "sessions")); len(ents) != 1 {
		t.Errorf("files after Open: %v", ents)
	}
}

// TestSyncPoints: Sync, Exit and Closed fsync at once, output within a
// second, and what was synced is visible to a fresh Store.
func TestSyncPoints(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		record func(s *Store)
	}{
		{"Sync", func(s *Store) { s.Sync("sess_1") }},
		{"Exit", func(s *Store) { s.Exit("sess_1", "term_1", *code(1)) }},
		{"Closed", func(s *Store) { s.Closed("sess_1") }},
		{"a second of output", func(s *Store) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := open(t, Options{Dir: dir})
			s.Create("sess_1", Meta{Cwd: "/p"})
			s.Flush()
			before := s.w.syncs.Load()
			output(s, "sess_1", "term_1", []byte("tick\n"))
			tt.record(s)
			deadline := time.Now().Add(testloop.Bound(syncEvery))
			for s.w.syncs.Load() == before {
				if time.Now().After(deadline) {
					t.Fatal("no fsync")
				}
				time.Sleep(10 * time.Millisecond)
			}
			s2 := open(t, Options{Dir: dir})
			h, err := s2.Load("sess_1")
			if err != nil {
				t.Fatal(err)
			}
			if o := h.Terminals["term_1"]; o == nil || string(o.Data) != "tick\n" {
				t.Errorf("a fresh Store does not see the output: %+v", o)
			}
		})
	}
}

// TestWrittenThenReopened: what Written waits for is written, not
// fsynced, and another Store (the next image of an upgrade in place)
// reads it; that Store's Reopen of the session fsyncs its file at once.
func TestWrittenThenReopened(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	s.Create("sess_1", Meta{Cwd: "/p"})
	s.Flush()
	before := s.w.syncs.Load()
	output(s, "sess_1", "term_1", []byte("tick\n"))
	if err := s.Written(); err != nil {
		t.Fatal(err)
	}
	if n := s.w.syncs.Load() - before; n != 0 {
		t.Errorf("Written fsynced %d times, want none", n)
	}
	s2 := open(t, Options{Dir: dir})
	h, err := s2.Load("sess_1")
	if err != nil {
		t.Fatal(err)
	}
	if o := h.Terminals["term_1"]; o == nil || string(o.Data) != "tick\n" {
		t.Errorf("another Store does not see what was written: %+v", o)
	}
	s.Close() // as the exec of the next image closes its lock
	if _, err := s2.Reopen("sess_1"); err != nil {
		t.Fatal(err)
	}
	s2.Written()
	if s2.w.syncs.Load() == 0 {
		t.Error("Reopen did not fsync the file in its batch")
	}
}

// TestPrune: past Max, the least recently updated closed sessions go
// first, then (pruneSettle after Open) those never closed, whose agent
// died; never one live here.
func TestPrune(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := bytes.Repeat([]byte("x"), 3000) // ~4000 bytes a session
	s := open(t, Options{Dir: dir, Max: 1 << 20})
	for _, id := range []string{"sess_open_old", "sess_closed_1", "sess_closed_2", "sess_closed_3", "sess_crashed"} {
		s.Create(id, Meta{Cwd: "/p"})
		output(s, id, "term_1", big)
		if strings.HasPrefix(id, "sess_closed") {
			s.Closed(id)
		}
		s.Flush()
		time.Sleep(5 * time.Millisecond)
	}
	s.Close()
	sizes := map[string]int64{}
	var total int64
	s = open(t, Options{Dir: dir, Max: 1 << 20})
	for _, i := range s.List() {
		sizes[i.ID] = i.Size
		total += i.Size
	}
	s.Close()
	ids := func(s *Store) []string {
		var ids []string
		for _, i := range s.List() {
			ids = append(ids, i.ID)
		}
		slices.Sort(ids)
		return ids
	}
	// Room for all but about two sessions: the two oldest closed go, the
	// open and the crashed one (not closed) stay, although sess_open_old
	// is older than any.
	max := total - sizes["sess_closed_1"] - sizes["sess_closed_2"]/2
	s = open(t, Options{Dir: dir, Max: max, Log: slog.New(slog.DiscardHandler)})
	if got, want := ids(s), []string{"sess_closed_3", "sess_crashed", "sess_open_old"}; !slices.Equal(got, want) {
		t.Errorf("after pruning to %d of %d: %v, want %v", max, total, got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "sessions", "sess_closed_1.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pruned file still there: %v", err)
	}
	// Within pruneSettle of Open (a daemon upgraded in place makes its
	// sessions live again then), a session never closed is not pruned.
	s.Close()
	s = open(t, Options{Dir: dir, Max: 1, Log: slog.New(slog.DiscardHandler)})
	if got, want := ids(s), []string{"sess_crashed", "sess_open_old"}; !slices.Equal(got, want) {
		t.Errorf("with Max 1, within pruneSettle: %v, want %v", got, want)
	}
	s.Close()
	// A session live here is never pruned, even closed-and-reopened, even
	// when nothing else can go; one never closed and not live goes.
	writeGood(t, dir, "sess_closed_3")
	closeIt := open(t, Options{Dir: dir})
	closeIt.Reopen("sess_closed_3")
	closeIt.Closed("sess_closed_3")
	closeIt.Close()
	settle := time.Duration(0)
	var logs logCount
	s = open(t, Options{Dir: dir, Max: max, Log: logs.logger(), hooks: &hooks{settle: &settle}})
	for _, id := range []string{"sess_closed_3", "sess_open_old"} {
		if _, err := s.Reopen(id); err != nil {
			t.Fatal(err)
		}
	}
	output(s, "sess_open_old", "term_1", bytes.Repeat(big, 10))
	s.Flush()
	if got, want := ids(s), []string{"sess_closed_3", "sess_open_old"}; !slices.Equal(got, want) {
		t.Errorf("over Max with a crashed session: %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "sessions", "sess_crashed.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the crashed session's file is still there: %v", err)
	}
	// Closed again, it is the one to go.
	s.Closed("sess_closed_3")
	output(s, "sess_open_old", "term_1", big)
	s.Flush()
	if s.Exists("sess_closed_3") || !s.Exists("sess_open_old") {
		t.Errorf("after closing: %+v", s.List())
	}
	if logs.count() != 0 {
		t.Errorf("pruning logged warnings: %q", logs.lines)
	}
}

// TestOff: a Store that is off writes nothing.
func TestOff(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir, Off: true})
	s.Create("sess_1", Meta{Cwd: "/p"})
	s.Update("sess_1", "", msg(acp.KindUserMessage, "msg_1", "x"))
	output(s, "sess_1", "term_1", []byte("x"))
	s.Exit("sess_1", "term_1", *code(0))
	s.Prompt("sess_1", "k", "msg_1")
	s.Sync("sess_1")
	s.Closed("sess_1")
	if err := s.Flush(); err != nil {
		t.Error(err)
	}
	if l := s.List(); len(l) != 0 {
		t.Errorf("List: %v", l)
	}
	if _, ok := key(s, "sess_1", "k"); ok {
		t.Error("key found")
	}
	s.Close()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("wrote %v", ents)
	}
}

// TestFloodStalledDisk: a terminal that floods while the writer is
// stalled (a disk that does not answer) costs the Store no memory: the
// output stays in the terminal's ring, and once the writer goes on it
// reads the ring's last bytes and records the rest as a gap; no other
// record is dropped. It runs alone: it measures the heap.
func TestFloodStalledDisk(t *testing.T) {
	const scroll = 64 << 10
	release := make(chan struct{})
	var once sync.Once
	stall := func() {
		once.Do(func() { <-release })
	}
	dir := t.TempDir()
	s := open(t, Options{Dir: dir, Scrollback: scroll, hooks: &hooks{batch: stall}})
	s.Create("sess_1", Meta{Cwd: "/p"})
	output(s, "sess_1", "term_1", []byte("first"))

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	chunk := bytes.Repeat([]byte("y"), 4096)
	const chunks = 4 << 10 // 16 MiB
	for i := range chunks {
		output(s, "sess_1", "term_1", chunk)
		if i%1024 == 0 {
			s.Update("sess_1", "", msg(acp.KindAgentMessage, fmt.Sprint("msg_", i), "during the flood"))
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 4*scroll {
		t.Errorf("heap grew by %d bytes during a flood of %d into a ring of %d", grew, chunks*len(chunk), scroll)
	}
	close(release)
	s.Flush()
	output(s, "sess_1", "term_1", []byte("after"))
	h, err := s.Load("sess_1")
	if err != nil {
		t.Fatal(err)
	}
	o := h.Terminals["term_1"]
	if want := int64(5 + chunks*4096 + 5); o.Written != want {
		t.Errorf("written %d, want %d", o.Written, want)
	}
	if !bytes.HasSuffix(o.Data, []byte("yyyyafter")) || len(o.Data) < scroll {
		t.Errorf("output: %d bytes, ending %q; want the ring's last %d and what came after", len(o.Data), tail(o.Data, 9), scroll)
	}
	if len(h.Updates) != chunks/1024 {
		t.Errorf("%d updates kept, want %d", len(h.Updates), chunks/1024)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "sessions", "sess_1.jsonl"))
	if !bytes.Contains(b, []byte(`"t":"gap"`)) {
		t.Error("no gap recorded")
	}
	if len(b) > 4*scroll {
		t.Errorf("a file of %d bytes for %d bytes of scrollback", len(b), scroll)
	}
}

// TestFullQueueWaits: past the queue's bound, a record that is not
// output waits for the writer instead of being dropped.
func TestFullQueueWaits(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var once sync.Once
	dir := t.TempDir()
	s := open(t, Options{Dir: dir, Queue: 4096, hooks: &hooks{batch: func() { once.Do(func() { <-release }) }}})
	s.Create("sess_1", Meta{Cwd: "/p"})
	const n = 100
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			s.Update("sess_1", "", msg(acp.KindAgentMessage, fmt.Sprint("msg_", i), "x"))
		}
	}()
	select {
	case <-done:
		t.Fatal("100 records did not wait for a stalled writer with a queue of 4 KiB")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-done
	h, err := s.Load("sess_1")
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Updates) != n {
		t.Errorf("%d updates kept, want %d", len(h.Updates), n)
	}
}

// key returns the messageId of the prompt that session id accepted with
// idempotencyKey k, as its history has it.
func key(s *Store, id, k string) (string, bool) {
	h, err := s.Load(id)
	if err != nil {
		return "", false
	}
	for _, p := range h.Prompts {
		if p.Key == k {
			return p.MessageID, true
		}
	}
	return "", false
}

// TestKeySurvivesReopen: a prompt's idempotencyKey is found again by a
// fresh Store, with its first messageId.
func TestKeySurvivesReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	s.Create("sess_1", Meta{Cwd: "/p"})
	s.Prompt("sess_1", "key-1", "msg_1")
	s.Prompt("sess_1", "", "msg_2")
	s.Prompt("sess_1", "key-3", "msg_3")
	if id, ok := key(s, "sess_1", "key-1"); !ok || id != "msg_1" {
		t.Errorf("Key before the write: %q %v", id, ok)
	}
	s.Close()
	s = open(t, Options{Dir: dir})
	for _, tt := range []struct {
		id, key, want string
		ok            bool
	}{
		{"sess_1", "key-1", "msg_1", true},
		{"sess_1", "key-3", "msg_3", true},
		{"sess_1", "", "", false},
		{"sess_1", "key-2", "", false},
		{"sess_2", "key-1", "", false},
	} {
		if id, ok := key(s, tt.id, tt.key); id != tt.want || ok != tt.ok {
			t.Errorf("Key(%s, %s) = %q %v, want %q %v", tt.id, tt.key, id, ok, tt.want, tt.ok)
		}
	}
}

// TestDelete: a deleted session is gone, from this Store and the next.
func TestDelete(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeGood(t, dir, "sess_1")
	writeGood(t, dir, "sess_2")
	s := open(t, Options{Dir: dir})
	if err := s.Delete("sess_1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("sess_1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete: %v", err)
	}
	if l := s.List(); len(l) != 1 || l[0].ID != "sess_2" {
		t.Errorf("List: %+v", l)
	}
	s.Close()
	s = open(t, Options{Dir: dir})
	if s.Exists("sess_1") {
		t.Error("sess_1 came back")
	}
}

// TestRefresh: a Store sees the sessions another Store (another
// process) added, changed and removed in its directory once it
// refreshes, and logs a corrupt file once.
func TestRefresh(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var logs logCount
	b := open(t, Options{Dir: dir, Log: logs.logger()})
	b.Create("sess_b", Meta{Cwd: "/b"})
	a := open(t, Options{Dir: dir})
	a.Create("sess_a", Meta{Cwd: "/a"})
	output(a, "sess_a", "term_1", []byte("one"))
	a.Flush()
	if b.Exists("sess_a") {
		t.Fatal("seen before Refresh")
	}
	if err := b.Refresh(); err != nil {
		t.Fatal(err)
	}
	if h, err := b.Load("sess_a"); err != nil || string(h.Terminals["term_1"].Data) != "one" {
		t.Fatalf("after Refresh: %v", err)
	}
	output(a, "sess_a", "term_1", []byte("two"))
	a.Closed("sess_a")
	a.Flush()
	b.Refresh()
	if h, err := b.Load("sess_a"); err != nil || !h.Closed || string(h.Terminals["term_1"].Data) != "onetwo" {
		t.Fatalf("after a change and Refresh: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "sessions", "sess_bad.jsonl"), []byte("junk\n"), 0o600)
	a.Delete("sess_a")
	b.Refresh()
	b.Refresh()
	if l := b.List(); len(l) != 1 || l[0].ID != "sess_b" {
		t.Errorf("after a delete and Refresh: %+v", l)
	}
	if logs.count() != 1 {
		t.Errorf("log lines: %q, want one", logs.lines)
	}
}

// TestConcurrentAppenders: many goroutines append to one session and
// to their own; everything is kept, each terminal's output in order.
func TestConcurrentAppenders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	const n, each = 8, 100
	s.Create("sess_shared", Meta{Cwd: "/p"})
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			own := fmt.Sprint("sess_", g)
			s.Create(own, Meta{Cwd: "/" + own})
			for i := range each {
				output(s, "sess_shared", fmt.Sprint("term_", g), fmt.Appendf(nil, "%d,", i))
				s.Update("sess_shared", "", msg(acp.KindAgentMessage, fmt.Sprint("m", g, "_", i), "x"))
				output(s, own, "term_1", []byte("z"))
				if i%50 == 0 {
					s.Sync(own)
					s.List()
					s.Stat(own)
				}
			}
			s.Prompt(own, "k", "msg_1")
			s.Closed(own)
		})
	}
	wg.Wait()
	s.Close()
	s = open(t, Options{Dir: dir})
	h, err := s.Load("sess_shared")
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Updates) != n*each {
		t.Errorf("%d updates, want %d", len(h.Updates), n*each)
	}
	for g := range n {
		var want []byte
		for i := range each {
			want = fmt.Appendf(want, "%d,", i)
		}
		if o := h.Terminals[fmt.Sprint("term_", g)]; o == nil || !bytes.Equal(o.Data, want) {
			t.Errorf("term_%d output out of order or short", g)
		}
		own := fmt.Sprint("sess_", g)
		ho, err := s.Load(own)
		if err != nil || !ho.Closed || ho.Terminals["term_1"].Written != each {
			t.Errorf("%s: %v", own, err)
		}
		if id, ok := key(s, own, "k"); !ok || id != "msg_1" {
			t.Errorf("%s key: %q %v", own, id, ok)
		}
	}
}

// TestDefaultDir: XDG_STATE_HOME if absolute, else ~/.local/state.
func TestDefaultDir(t *testing.T) {
	for _, tt := range []struct{ xdg, home, want string }{
		{"/x/state", "/h", "/x/state/shellagent"},
		{"", "/h", "/h/.local/state/shellagent"},
		{"relative", "/h", "/h/.local/state/shellagent"},
	} {
		t.Setenv("XDG_STATE_HOME", tt.xdg)
		t.Setenv("HOME", tt.home)
		if got, err := DefaultDir(); err != nil || got != tt.want {
			t.Errorf("XDG_STATE_HOME=%q HOME=%q: %q %v, want %q", tt.xdg, tt.home, got, err, tt.want)
		}
	}
}

// BenchmarkAppendOutput is the cost to a terminal of one 4 KiB chunk
// of output with history: its ring's write, and telling the Store (the
// writer reads meanwhile, on its own goroutine).
func BenchmarkAppendOutput(b *testing.B) {
	s, ring, tap, chunk := oneTerminal(b)
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		ring.Write(chunk)
		tap.Wrote()
	}
	s.Flush()
}

// Output beyond a terminal's scrollback when the writer reads it is
// written as a gap, never as lines that a compaction would drop: a flood
// costs the disk its scrollback per read, not its size. What Load reads
// is the same.
func TestFloodWritesItsScrollbackPerBatch(t *testing.T) {
	t.Parallel()
	const scroll, chunks = 1000, 200
	dir := t.TempDir()
	release := make(chan struct{})
	var once sync.Once
	hk := &hooks{batch: func() { once.Do(func() { <-release }) }}
	s := open(t, Options{Dir: dir, Scrollback: scroll, hooks: hk, Log: slog.New(slog.DiscardHandler)})
	s.Create("sess_1", Meta{Cwd: "/p"}) // the first batch: the writer waits in it
	var all []byte
	for i := range chunks {
		c := fmt.Appendf(nil, "%0999d|", i)
		all = append(all, c...)
		output(s, "sess_1", "term_1", c)
	}
	close(release)
	s.Flush()
	fi, err := os.Stat(filepath.Join(dir, "sessions", "sess_1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 4*scroll {
		t.Errorf("%d bytes of output in one batch made a file of %d bytes; the scrollback is %d", len(all), fi.Size(), scroll)
	}
	h, err := s.Load("sess_1")
	if err != nil {
		t.Fatal(err)
	}
	check(t, h, want{cwd: "/p", terms: map[string]string{"term_1": string(all[len(all)-scroll:])}, written: map[string]int64{"term_1": int64(len(all))}})
}

// On a disk that hangs, the records a session waits for (Exit, Prompt,
// Reserve) wait createWait once: until the writer has written a batch
// again, they no longer wait, so a hung disk costs a session one bound,
// not one per exit. Once it has written again, what was queued is in
// the file and the next record is waited for again.
func TestWaitsGiveUpOnAHungWriter(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	release := make(chan struct{})
	var first sync.Once
	var created atomic.Bool
	hk := &hooks{batch: func() {
		if created.Load() {
			first.Do(func() { <-release })
		}
	}}
	s := open(t, Options{Dir: dir, hooks: hk, Log: slog.New(slog.DiscardHandler)})
	s.Create("sess_1", Meta{Cwd: "/p"})
	created.Store(true)
	start := time.Now()
	s.Exit("sess_1", "term_1", acp.ExitStatus{}) // the writer hangs in this batch
	if d := time.Since(start); d < createWait {
		t.Errorf("the first Exit on a hung writer returned after %v, want %v", d, createWait)
	}
	start = time.Now()
	s.Exit("sess_1", "term_2", acp.ExitStatus{})
	s.Prompt("sess_1", "k1", "msg_1")
	if d := time.Since(start); d > createWait/2 {
		t.Errorf("records after a timed-out wait waited %v for the hung writer", d)
	}
	close(release)
	s.Flush()
	s.Exit("sess_1", "term_3", acp.ExitStatus{}) // waited for again: written when it returns
	b, _ := os.ReadFile(filepath.Join(dir, "sessions", "sess_1.jsonl"))
	for _, want := range []string{`"term":"term_1"`, `"term":"term_2"`, `"key":"k1"`, `"term":"term_3"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the file lacks %s once the writer wrote again:\n%s", want, b)
		}
	}
}
