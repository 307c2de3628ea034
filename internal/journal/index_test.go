package journal

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"shellagent/acp"
)

// counting counts the bytes read from each file the index opens.
type counting struct {
	mu   sync.Mutex
	read map[string]int64 // by file name
}

func (c *counting) open(path string) (source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return countedFile{f, c}, nil
}

func (c *counting) add(name string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read[filepath.Base(name)] += int64(n)
}

func (c *counting) reset() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.read
	c.read = make(map[string]int64)
	return r
}

type countedFile struct {
	*os.File
	c *counting
}

func (f countedFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.c.add(f.Name(), n)
	return n, err
}

// perFileBound is what the index may read of one file, whatever its size:
// its header, one block back from its end, and what follows its last mark.
const perFileBound = maxHeader + tailBlock + markEvery + 1<<10

// writeSessions records n sessions of size bytes of output each, half
// of them titled only after their output (a title set late in a long
// session), every third closed, every fifth closed and reopened.
func writeSessions(t testing.TB, dir string, n, size int) {
	t.Helper()
	s, err := Open(Options{Dir: dir, Max: 1 << 40, Queue: 1 << 30, Scrollback: size, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 4<<10) // 64 KiB
	for i := range n {
		id := fmt.Sprintf("sess_%03d", i)
		s.Create(id, Meta{Cwd: "/p/" + id, Title: "early " + id})
		s.Update(id, "", msg(acp.KindUserMessage, "msg_1", "make"))
		for w := 0; w < size; w += len(chunk) {
			output(s, id, "term_1", chunk[:min(len(chunk), size-w)])
		}
		if i%2 == 0 {
			s.Meta(id, Meta{Cwd: "/p/" + id, Title: "late " + id})
		}
		switch {
		case i%5 == 0:
			s.Closed(id)
			if _, err := s.Reopen(id); err != nil {
				t.Fatal(err)
			}
		case i%3 == 0:
			s.Closed(id)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenReadsHeadAndTail: Open, Refresh and List read a bounded number
// of bytes of each file (its header and its tail from the last mark), not
// the file, and List shows what a full read of each file finds: cwd, a
// title set late in a long session, updatedAt, closed.
func TestOpenReadsHeadAndTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n, size = 4, 1 << 20 // each kind of writeSessions
	writeSessions(t, dir, n, size)
	c := &counting{read: make(map[string]int64)}
	s := open(t, Options{Dir: dir, hooks: &hooks{open: c.open}})
	list := s.List()
	read := c.reset()
	if len(list) != n {
		t.Fatalf("List has %d sessions, want %d", len(list), n)
	}
	var total int64
	for _, i := range list {
		name := i.ID + ".jsonl"
		if i.Size < size {
			t.Errorf("%s: %d bytes, want more than %d", name, i.Size, size)
		}
		if read[name] > perFileBound {
			t.Errorf("Open read %d bytes of %s (%d bytes), want at most %d", read[name], name, i.Size, perFileBound)
		}
		total += read[name]
		var num int
		fmt.Sscanf(i.ID, "sess_%d", &num)
		if num != 1 { // 0 reopened, titled late; 2 titled late; 3 closed
			full, err := readFile(filepath.Join(dir, "sessions", name), i.ID, size, keepSizes)
			if err != nil {
				t.Fatal(err)
			}
			if w := full.info; i.Cwd != w.Cwd || i.Title != w.Title || !i.UpdatedAt.Equal(w.UpdatedAt) || i.Closed != w.Closed || i.Size != w.Size {
				t.Errorf("List has %+v, a full read %+v", i, w)
			}
		}
		title := "early " + i.ID
		if num%2 == 0 {
			title = "late " + i.ID
		}
		if i.Title != title || i.Closed != (num%3 == 0 && num%5 != 0) {
			t.Errorf("%s: title %q closed %v", i.ID, i.Title, i.Closed)
		}
	}
	t.Logf("Open read %d bytes of %d files of %d bytes of output each", total, n, size)
	for i := 1; i < len(list); i++ {
		if list[i].UpdatedAt.After(list[i-1].UpdatedAt) {
			t.Errorf("List is not newest first at %d", i)
		}
	}

	// Another process appends to a session and closes it: Refresh reads
	// its tail again, and nothing of the others.
	other := open(t, Options{Dir: dir, Log: slog.New(slog.DiscardHandler)})
	if _, err := other.Reopen("sess_001"); err != nil {
		t.Fatal(err)
	}
	other.Meta("sess_001", Meta{Cwd: "/p/sess_001", Title: "later still"})
	output(other, "sess_001", "term_1", bytes.Repeat([]byte("y"), 100<<10))
	other.Closed("sess_001")
	other.Close()
	if err := s.Refresh(); err != nil {
		t.Fatal(err)
	}
	read = c.reset()
	if len(read) != 1 || read["sess_001.jsonl"] > perFileBound {
		t.Errorf("Refresh read %v, want at most %d bytes of sess_001.jsonl only", read, perFileBound)
	}
	if i, _ := s.Stat("sess_001"); i.Title != "later still" || !i.Closed || i.Elsewhere {
		t.Errorf("after Refresh: %+v", i)
	}
}

// BenchmarkOpen: Open and List of a history of 200 sessions of 1 MiB of
// output each.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	const n, size = 200, 1 << 20
	writeSessions(b, dir, n, size)
	c := &counting{read: make(map[string]int64)}
	b.ResetTimer()
	for range b.N {
		s, err := Open(Options{Dir: dir, Max: 1 << 40, hooks: &hooks{open: c.open}})
		if err != nil {
			b.Fatal(err)
		}
		if len(s.List()) != n {
			b.Fatal("sessions missing")
		}
		s.Close()
	}
	b.StopTimer()
	var total int64
	for _, v := range c.reset() {
		total += v
	}
	b.ReportMetric(float64(total)/float64(b.N*n), "bytes-read/session")
}

// TestRefreshRacingCreations: a new session's file is never seen without
// its header, so a Refresh beside another process creating sessions
// logs nothing. (Before, the file was created empty and its header
// written after.)
func TestRefreshRacingCreations(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var logs logCount
	reader := open(t, Options{Dir: dir, Log: logs.logger()})
	maker := open(t, Options{Dir: dir})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 100 {
			maker.Create(fmt.Sprint("sess_", i), Meta{Cwd: "/p"})
			if i%10 == 0 {
				maker.Flush()
			}
		}
		maker.Flush()
	}()
	for refreshing := true; refreshing; {
		select {
		case <-done:
			refreshing = false
		default:
		}
		if err := reader.Refresh(); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(reader.List()); n != 100 {
		t.Errorf("%d sessions listed, want 100", n)
	}
	if logs.count() != 0 {
		t.Errorf("Refresh logged %d lines beside the creations, the first %q", logs.count(), logs.lines[0])
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "sessions")); len(ents) != 100 {
		t.Errorf("%d files, want 100: a temporary file left?", len(ents))
	}
}

// TestLiveElsewhere: a session live in one process (Store) is locked:
// another lists it as Elsewhere, cannot reopen it, delete it or prune
// it, through a compaction too; once it is closed there, it can.
func TestLiveElsewhere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const scroll = 1000
	a := open(t, Options{Dir: dir, Scrollback: scroll, CompactAt: 4096, Log: slog.New(slog.DiscardHandler)})
	a.Create("sess_1", Meta{Cwd: "/p", Title: "a's"})
	output(a, "sess_1", "term_1", []byte("one"))
	a.Flush()
	b := open(t, Options{Dir: dir, Log: slog.New(slog.DiscardHandler)})
	// pruner prunes all it may: never closed ones at once too.
	settle := time.Duration(0)
	pruner := open(t, Options{Dir: dir, Max: 1, hooks: &hooks{settle: &settle}, Log: slog.New(slog.DiscardHandler)})
	pruner.Create("sess_2", Meta{Cwd: "/p"})
	pruner.Closed("sess_2")
	check := func(when string) {
		t.Helper()
		if err := pruner.Refresh(); err != nil { // a batch: it prunes
			t.Fatal(err)
		}
		if err := b.Refresh(); err != nil {
			t.Fatal(err)
		}
		if i, ok := b.Stat("sess_1"); !ok || !i.Elsewhere || i.Title != "a's" {
			t.Errorf("%s: b has %+v %v, want it live elsewhere", when, i, ok)
		}
		_, err := b.Reopen("sess_1")
		if le := (*LiveError)(nil); !errors.Is(err, ErrLive) || !errors.As(err, &le) || le.PID != os.Getpid() {
			t.Errorf("%s: b reopens it: %v, want ErrLive naming pid %d", when, err, os.Getpid())
		}
		if err := b.Delete("sess_1"); !errors.Is(err, ErrLive) {
			t.Errorf("%s: b deletes it: %v", when, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "sessions", "sess_1.jsonl")); err != nil {
			t.Errorf("%s: the file of a live session went: %v", when, err)
		}
	}
	check("live in a")
	if pruner.Exists("sess_2") || !pruner.Exists("sess_1") {
		t.Errorf("the pruner, past Max 1, has %+v, want sess_1 only", pruner.List())
	}
	// A compaction renames a new file over the one locked: it is locked
	// before the rename.
	for i := range 200 {
		output(a, "sess_1", "term_1", fmt.Appendf(nil, "%050d", i))
		if i%20 == 0 {
			a.Flush()
		}
	}
	a.Flush()
	check("after a's compaction")
	pruner.Close()
	a.Closed("sess_1")
	a.Flush()
	if err := b.Refresh(); err != nil {
		t.Fatal(err)
	}
	if i, _ := b.Stat("sess_1"); i.Elsewhere || !i.Closed {
		t.Errorf("closed in a, b has %+v", i)
	}
	if _, err := b.Reopen("sess_1"); err != nil {
		t.Fatalf("b cannot reopen it once a closed it: %v", err)
	}
	if _, err := a.Reopen("sess_1"); !errors.Is(err, ErrLive) {
		t.Errorf("a reopens it while b has it live: %v", err)
	}
	b.Closed("sess_1")
	b.Flush()
	if err := a.Delete("sess_1"); err != nil {
		t.Errorf("a cannot delete it once b closed it: %v", err)
	}
}

// TestConfigKept: a session's config options are in its history, the
// last value of each, through a compaction too.
func TestConfigKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir, Scrollback: 100, CompactAt: 1024, Log: slog.New(slog.DiscardHandler)})
	s.Create("sess_1", Meta{Cwd: "/p"})
	s.Config("sess_1", "foreground_timeout", "30s")
	s.Config("sess_1", "notifications", "off")
	s.Config("sess_1", "foreground_timeout", "60s")
	want := map[string]string{"foreground_timeout": "60s", "notifications": "off"}
	h, err := s.Load("sess_1")
	if err != nil || fmt.Sprint(h.Config) != fmt.Sprint(want) {
		t.Fatalf("Load: %v %v, want %v", h.Config, err, want)
	}
	for i := range 100 {
		output(s, "sess_1", "term_1", fmt.Appendf(nil, "%0100d", i))
		s.Flush()
	}
	s.Close()
	p, _ := readFile(filepath.Join(dir, "sessions", "sess_1.jsonl"), "sess_1", 100, keepSizes)
	if p == nil || p.info.Size > 8<<10 {
		t.Fatalf("not compacted: %+v", p)
	}
	s = open(t, Options{Dir: dir})
	if h, err := s.Load("sess_1"); err != nil || fmt.Sprint(h.Config) != fmt.Sprint(want) {
		t.Errorf("after a compaction: %v %v, want %v", h.Config, err, want)
	}
}

// TestReservedIDsKept: Reserve returns once its record is in the file (a
// process killed right after leaves it there), and a session's history
// has the highest reservation of each prefix, through a compaction too.
func TestReservedIDsKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "sessions", "sess_1.jsonl")
	s := open(t, Options{Dir: dir, Scrollback: 100, CompactAt: 1024, Log: slog.New(slog.DiscardHandler)})
	s.Create("sess_1", Meta{Cwd: "/p"})
	s.Reserve("sess_1", map[string]int{"call": 32, "msg": 33, "term": 32})
	if b, _ := os.ReadFile(file); !bytes.Contains(b, []byte(`"t":"ids"`)) {
		t.Fatalf("Reserve returned before its record was written:\n%s", b)
	}
	s.Reserve("sess_1", map[string]int{"call": 64, "msg": 33, "term": 40})
	want := map[string]int{"call": 64, "msg": 33, "term": 40}
	h, err := s.Load("sess_1")
	if err != nil || fmt.Sprint(h.IDs) != fmt.Sprint(want) {
		t.Fatalf("Load: %v %v, want %v", h.IDs, err, want)
	}
	for i := range 100 {
		output(s, "sess_1", "term_1", fmt.Appendf(nil, "%0100d", i))
		s.Flush()
	}
	s.Close()
	p, _ := readFile(file, "sess_1", 100, keepSizes)
	if p == nil || p.info.Size > 8<<10 {
		t.Fatalf("not compacted: %+v", p)
	}
	s = open(t, Options{Dir: dir})
	if h, err := s.Load("sess_1"); err != nil || fmt.Sprint(h.IDs) != fmt.Sprint(want) {
		t.Errorf("after a compaction: %v %v, want %v", h.IDs, err, want)
	}
}

// TestPromptIsWrittenWhenItReturns: Prompt returns once its record is in
// the file, so a process killed right after its answer leaves it there.
func TestPromptIsWrittenWhenItReturns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir, Log: slog.New(slog.DiscardHandler)})
	s.Create("sess_1", Meta{Cwd: "/p"})
	for i := range 20 {
		key := fmt.Sprint("k", i)
		s.Prompt("sess_1", key, fmt.Sprint("msg_", i))
		if b, _ := os.ReadFile(filepath.Join(dir, "sessions", "sess_1.jsonl")); !bytes.Contains(b, []byte(`"key":"`+key+`"`)) {
			t.Fatalf("Prompt returned before the record of %s was written:\n%s", key, b)
		}
	}
}
