package journal

import (
	"bytes"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"shellagent/acp"
)

// TestAdoptReadsNothing: the next image of an upgrade in place makes a
// session live again with what the old image handed over (Handover,
// Adopt) without reading a byte of its file, and writes on as the old
// image would have: what its writer knows of the file is what a full
// read finds, and the file loads whole. A file changed between the
// images is read.
func TestAdoptReadsNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const scroll = 64 << 10
	opts := Options{Dir: dir, Scrollback: scroll, Log: slog.New(slog.DiscardHandler)}
	old := open(t, opts)
	old.Create("sess_1", Meta{Cwd: "/p", Title: "make"})
	old.Update("sess_1", "", msg(acp.KindUserMessage, "msg_1", "make"))
	old.Update("sess_1", "call_1", call("call_1", "pending"))
	old.Update("sess_1", "call_1", call("call_1", "in_progress")) // the first state is dead bytes
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 1<<10)
	for range 32 { // 512 KiB: most of it beyond the scrollback
		output(old, "sess_1", "term_1", chunk)
	}
	old.Create("sess_2", Meta{Cwd: "/q"})
	handed, err := old.Handover()
	if err != nil {
		t.Fatal(err)
	}
	if handed["sess_1"] == nil || handed["sess_2"] == nil {
		t.Fatalf("Handover handed %v, want sess_1 and sess_2", slices.Collect(maps.Keys(handed)))
	}
	old.Close() // as the exec drops the old image's locks

	// Between the images, another process writes to sess_2.
	other := open(t, opts)
	if _, err := other.Reopen("sess_2"); err != nil {
		t.Fatal(err)
	}
	other.Update("sess_2", "", msg(acp.KindUserMessage, "msg_1", "ls"))
	other.Close()

	c := &counting{read: make(map[string]int64)}
	opts.hooks = &hooks{open: c.open}
	s := open(t, opts)
	c.reset()
	for _, id := range []string{"sess_1", "sess_2"} {
		if err := s.Adopt(id, handed[id]); err != nil {
			t.Fatal(err)
		}
	}
	read := c.reset()
	if n := read["sess_1.jsonl"]; n != 0 {
		t.Errorf("Adopt read %d bytes of sess_1's file, want none", n)
	}
	fi, err := os.Stat(filepath.Join(dir, "sessions", "sess_2.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := read["sess_2.jsonl"]; n < fi.Size() {
		t.Errorf("Adopt read %d bytes of sess_2's file, changed since the handover, want all %d", n, fi.Size())
	}

	s.Update("sess_1", "call_1", call("call_1", "completed"))
	s.Exit("sess_1", "term_1", *code(0))
	s.Update("sess_2", "", msg(acp.KindAgentMessage, "msg_2", "ok"))
	now, err := s.Handover()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"sess_1", "sess_2"} {
		full, err := readFile(filepath.Join(dir, "sessions", id+".jsonl"), id, scroll, keepSizes)
		if err != nil {
			t.Fatal(err)
		}
		h := now[id]
		if h == nil {
			t.Fatalf("%s: not handed over", id)
		}
		terms := make(map[string][3]int64)
		for term, t := range full.terms {
			terms[term] = [3]int64{t.inFile, t.lines, t.written}
		}
		if h.Size != full.info.Size || h.Dead != full.deadItems || !maps.Equal(h.Items, full.itemLen) ||
			!maps.Equal(h.Terms, terms) || h.Cwd != full.info.Cwd || h.Title != full.info.Title {
			t.Errorf("%s: the writer has %+v, a full read of the file %+v", id, h, full.file(id))
		}
	}
	got, err := s.Load("sess_1")
	if err != nil {
		t.Fatal(err)
	}
	check(t, got, want{cwd: "/p", title: "make",
		updates: []string{"=" + js(msg(acp.KindUserMessage, "msg_1", "make")), "call_1=" + js(call("call_1", "completed"))},
		terms:   map[string]string{"term_1": string(bytes.Repeat(chunk, 32)[32*len(chunk)-scroll:])},
		written: map[string]int64{"term_1": int64(32 * len(chunk))},
		exits:   map[string]*acp.ExitStatus{"term_1": code(0)}})
}

// TestPruneSparesAHandedOverSession: between the images of an upgrade in
// place no process holds the lock of the sessions live in the daemon
// (the exec drops it, Adopt takes it again), and they were never closed.
// Another process sharing the directory, over Max and open for longer
// than the settling time, must not prune them then, however long they
// were idle: the file of an idle detached session was removed in that
// window before, and the new image's Adopt found no file.
func TestPruneSparesAHandedOverSession(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	quiet := slog.New(slog.DiscardHandler)
	settle := 200 * time.Millisecond
	pruner := open(t, Options{Dir: dir, Max: 1, hooks: &hooks{settle: &settle}, Log: quiet})
	old := open(t, Options{Dir: dir, Log: quiet})
	old.Create("sess_1", Meta{Cwd: "/p", Title: "idle"})
	old.Update("sess_1", "", msg(acp.KindUserMessage, "msg_1", "sleep 1000 &"))
	if err := old.Flush(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "sessions", "sess_1.jsonl")
	hourAgo := time.Now().Add(-time.Hour) // idle, detached, for an hour
	if err := os.Chtimes(file, hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}
	time.Sleep(settle + 50*time.Millisecond) // the pruner has been open for longer than its settling time
	if err := pruner.Refresh(); err != nil { // a batch: it prunes what it may
		t.Fatal(err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the file of a session live in another process was pruned: %v", err)
	}
	handed, err := old.Handover()
	if err != nil {
		t.Fatal(err)
	}
	old.Close() // as the exec drops the old image's locks
	if err := pruner.Refresh(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("the file of a session being handed over was pruned: %v", err)
	}
	next := open(t, Options{Dir: dir, Log: quiet})
	if err := next.Adopt("sess_1", handed["sess_1"]); err != nil {
		t.Errorf("the next image adopts the session: %v", err)
	}
}
