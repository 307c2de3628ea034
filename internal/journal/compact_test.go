package journal

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// floodedFile writes a session file whose terms terminals each wrote
// batches × scroll bytes of output (a batch is written whole: a flood read
// once per batch), none compacted, and returns its path.
func floodedFile(tb testing.TB, terms, batches, scroll int) string {
	tb.Helper()
	dir := tb.TempDir()
	s := open(tb, Options{Dir: dir, Scrollback: scroll, CompactAt: 1 << 40})
	s.Create("sess_1", Meta{Cwd: "/p"})
	for i := range batches {
		for k := range terms {
			output(s, "sess_1", fmt.Sprintf("term_%d", k+1), bytes.Repeat([]byte{byte('a' + i%26)}, scroll))
		}
		s.Flush()
	}
	s.Close()
	return filepath.Join(dir, "sessions", "sess_1.jsonl")
}

// rewriteFile does what a compaction does between reading the file and
// the temporary file's fsync: it reads the file at path and writes what
// Load would read from it to w.
func rewriteFile(path string, scroll int, w io.Writer) error {
	p, err := readFile(path, "sess_1", scroll, true)
	if err != nil {
		return err
	}
	return p.encode(bufio.NewWriterSize(w, encodeBuffer), "sess_1")
}

// A compaction holds the scrollback it keeps and a few buffers, not the
// file it rewrites: in a flood with history on, it runs every few MB, and
// its memory is what a small machine sees. Not parallel: it reads the
// process's allocation counter.
func TestCompactionAllocatesTheScrollbackNotTheFile(t *testing.T) {
	const terms, batches, scroll = 3, 16, 256 << 10
	path := floodedFile(t, terms, batches, scroll)
	var out bytes.Buffer
	out.Grow(2 * terms * scroll)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := rewriteFile(path, scroll, &out); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	// Each terminal's tail grows by doubling to the scrollback; then the
	// reader's and the writer's buffers and one decoded line.
	limit := uint64(2*terms*scroll + 1<<20)
	t.Logf("rewriting %d MB of %d terminals with %d KiB of scrollback each allocated %d KiB (%d MB written)", terms*batches*scroll>>20, terms, scroll>>10, allocated>>10, out.Len()>>20)
	if allocated > limit {
		t.Errorf("rewriting allocated %d KiB, want at most %d KiB", allocated>>10, limit>>10)
	}
	rewritten := filepath.Join(t.TempDir(), "sess_1.jsonl")
	if err := os.WriteFile(rewritten, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := readFile(rewritten, "sess_1", scroll, true)
	if err != nil {
		t.Fatal(err)
	}
	for k := range terms {
		term := fmt.Sprintf("term_%d", k+1)
		got := h.history().Terminals[term]
		if want := bytes.Repeat([]byte{byte('a' + (batches-1)%26)}, scroll); !bytes.Equal(got.Data, want) || got.Written != int64(batches*scroll) {
			t.Errorf("%s: %d bytes, %d written; want the last batch, %d written", term, len(got.Data), got.Written, batches*scroll)
		}
	}
}

// BenchmarkCompact is one compaction's reading and writing of a flooded
// session file (three terminals of DefaultScrollback, 16 batches each), to
// a discarded output: alloc_B/scrollback is what it allocates per byte of
// scrollback it keeps.
func BenchmarkCompact(b *testing.B) {
	const terms, batches, scroll = 3, 16, DefaultScrollback
	path := floodedFile(b, terms, batches, scroll)
	b.SetBytes(int64(terms * batches * scroll))
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		if err := rewriteFile(path, scroll, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(terms*scroll), "alloc_B/scrollback")
}
