package journal

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/internal/backoff"
)

// fakeClock is the writer's clock in a test: the time of the test's
// start, moved on by the test.
type fakeClock struct {
	start time.Time
	ahead atomic.Int64
}

func newFakeClock() *fakeClock { return &fakeClock{start: time.Now()} }

func (c *fakeClock) now() time.Time          { return c.start.Add(time.Duration(c.ahead.Load())) }
func (c *fakeClock) advance(d time.Duration) { c.ahead.Add(int64(d)) }

// levels counts the records of lc whose line holds msg, by level.
func levels(lc *logCount, msg string) (warn, info int) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for _, l := range lc.lines {
		switch {
		case !strings.Contains(l, msg):
		case strings.Contains(l, "level=WARN"):
			warn++
		case strings.Contains(l, "level=INFO"):
			info++
		}
	}
	return warn, info
}

// infoLog is a logCount that keeps Info records too.
func (l *logCount) infoLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, string(p))
		return len(p), nil
	}), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// openFDs is how many descriptors the process has open (Linux), or -1.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// On a full disk a write stops part way (ENOSPC after what fitted).
// Before, the part of a line written stayed in the file, and the next
// write once space was back went on after it: a corrupt line in the
// middle of the file, and the whole session skipped at the next Open
// ("skipping a session file ... invalid character"). Now the file ends
// with a whole line after each failure, what the writer drops while the
// disk is full is lost (the output as a gap), the failure is logged once
// for the run, and the history goes on once writes work again.
func TestFullDiskKeepsTheFileWhole(t *testing.T) {
	t.Parallel()
	const scroll = 4096
	dir := t.TempDir()
	clock := newFakeClock()
	var full atomic.Bool
	var tries atomic.Int64
	hk := &hooks{now: clock.now, write: func(f *os.File, p []byte) (int, error) {
		if !full.Load() {
			return f.Write(p)
		}
		tries.Add(1)
		n, err := f.Write(p[:len(p)/2]) // what fitted
		if err == nil {
			err = &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
		}
		return n, err
	}}
	var lc logCount
	s := open(t, Options{Dir: dir, Scrollback: scroll, hooks: hk, Log: lc.infoLogger()})
	s.Create("sess_1", Meta{Cwd: "/p"})
	var all []byte
	out := func(p []byte) {
		all = append(all, p...)
		output(s, "sess_1", "term_1", p)
	}
	out([]byte("before|"))
	s.Update("sess_1", "", msg(acp.KindUserMessage, "msg_1", "one"))
	s.Flush()

	full.Store(true)
	for i := range 40 {
		out(fmt.Appendf(nil, "full%04d|", i))
		s.Update("sess_1", "", msg(acp.KindAgentMessage, fmt.Sprint("msg_f", i), "lost"))
		s.Flush()
		clock.advance(time.Second)
	}
	if n := tries.Load(); n == 0 || n > 8 {
		t.Errorf("%d writes tried in 40 s of a full disk, want a few (after 1, 2, 4 ... s)", n)
	}
	full.Store(false)
	clock.advance(backoff.Max)
	out([]byte("after|"))
	s.Update("sess_1", "", msg(acp.KindUserMessage, "msg_2", "two"))
	s.Flush()
	s.Close()

	if warn, _ := levels(&lc, "write a session file"); warn != 1 {
		t.Errorf("%d warnings of the failed writes, want 1:\n%s", warn, strings.Join(lc.lines, ""))
	}
	if _, info := levels(&lc, "writing a session file works again"); info != 1 {
		t.Errorf("%d lines saying writes work again, want 1:\n%s", info, strings.Join(lc.lines, ""))
	}
	s2 := open(t, Options{Dir: dir, Scrollback: scroll, Log: lc.logger()})
	if _, ok := s2.Stat("sess_1"); !ok {
		t.Fatalf("the session is not listed after the disk was full:\n%s", strings.Join(lc.lines, ""))
	}
	h, err := s2.Load("sess_1")
	if err != nil {
		t.Fatalf("load after the disk was full: %v", err)
	}
	o := h.Terminals["term_1"]
	if !bytes.HasSuffix(o.Data, []byte("full0039|after|")) || o.Written != int64(len(all)) {
		t.Errorf("output %q, %d written; want it to end with the last before the disk had room and after, %d written", tail(o.Data, 40), o.Written, len(all))
	}
	var texts []string
	for _, u := range h.Updates {
		texts = append(texts, string(u.Update))
	}
	if got := strings.Join(texts, "\n"); !strings.Contains(got, `"one"`) || !strings.Contains(got, `"two"`) {
		t.Errorf("updates:\n%s\nwant the ones before and after the disk was full", got)
	}
}

// A compaction on a disk too full for it (its new file does not fit)
// fails; before, it was tried again at each batch, reading the whole
// file and writing what fitted each time, about 3 times a second for a
// flooding session, and logged each time. Now it is tried again after
// 1 s, then twice as long each time up to backoff.Max, logged once for the
// run, and once it works the run ends; the tries leave no file and no
// descriptor behind. It counts the process's descriptors, so it runs
// alone: a parallel test that opened one meanwhile failed it in CI (30
// open after, 25 before).
func TestFailingCompactionBacksOff(t *testing.T) {
	const scroll = 1000
	dir := t.TempDir()
	clock := newFakeClock()
	var mu sync.Mutex
	tries, full := 0, true
	hk := &hooks{now: clock.now, beforeRename: func(string) error {
		mu.Lock()
		defer mu.Unlock()
		tries++
		if full {
			return syscall.ENOSPC
		}
		return nil
	}}
	var lc logCount
	s := open(t, Options{Dir: dir, Scrollback: scroll, CompactAt: 4096, hooks: hk, Log: lc.infoLogger()})
	s.Create("sess_1", Meta{Cwd: "/p"})
	batch := func(i int) {
		for k := range 5 {
			output(s, "sess_1", "term_1", fmt.Appendf(nil, "%0999d|", i*10+k))
			s.Flush() // within the scrollback: each is written
		}
	}
	batch(0)
	fds := openFDs()
	const seconds = 62
	for i := range seconds {
		batch(i + 1)
		clock.advance(time.Second)
	}
	mu.Lock()
	got := tries
	full = false
	mu.Unlock()
	// Tried at once, then after 1, 2, 4, 8, 16 and 30 s.
	if got < 5 || got > 8 {
		t.Errorf("a compaction failing for %d s (a batch each second) was tried %d times; want 5 to 8", seconds, got)
	}
	if warn, _ := levels(&lc, "compact a session file"); warn != 1 {
		t.Errorf("%d warnings of the failed compactions, want 1:\n%s", warn, strings.Join(lc.lines, ""))
	}
	if n := openFDs(); n > fds {
		t.Errorf("%d descriptors open after the failing compactions, %d before", n, fds)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "sessions")); len(ents) != 1 {
		t.Errorf("files left by the failing compactions: %v", ents)
	}
	path := filepath.Join(dir, "sessions", "sess_1.jsonl")
	before, _ := os.Stat(path)
	clock.advance(backoff.Max)
	batch(seconds + 1)
	after, _ := os.Stat(path)
	if _, info := levels(&lc, "compacting a session file works again"); info != 1 || after.Size() >= before.Size() {
		t.Errorf("once there is room: %d lines saying compacting works again, file %d bytes then %d; want 1 and a smaller file:\n%s",
			info, before.Size(), after.Size(), strings.Join(lc.lines, ""))
	}
	h, err := s.Load("sess_1")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Appendf(nil, "%0999d|", (seconds+1)*10+4); !bytes.HasSuffix(h.Terminals["term_1"].Data, want) {
		t.Errorf("output ends %q, want the last line", tail(h.Terminals["term_1"].Data, 20))
	}
}
