package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
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

// rewriteFile does what a compaction does before the temporary file's
// fsync: it reads the file at path and writes what Load would read from
// it to w.
func rewriteFile(path string, scroll int, w io.Writer) error {
	p, err := readFile(path, "sess_1", scroll, keepUpdates)
	if err != nil {
		return err
	}
	return p.rewrite(bufio.NewWriterSize(w, encodeBuffer), path)
}

// A compaction holds its buffers, not the file it rewrites nor the output
// it keeps: in a flood with history on, it runs every few seconds, and
// its memory is what a small machine sees. Not parallel: it reads the
// process's allocation counter.
func TestCompactionHoldsNeitherTheFileNorItsOutput(t *testing.T) {
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
	// The two reads' and the writer's buffers, one line, the updates.
	const limit = 1 << 20
	t.Logf("rewriting %d MB of %d terminals with %d KiB of scrollback each allocated %d KiB (%d MB written)", terms*batches*scroll>>20, terms, scroll>>10, allocated>>10, out.Len()>>20)
	if allocated > limit {
		t.Errorf("rewriting allocated %d KiB, want at most %d KiB", allocated>>10, limit>>10)
	}
	rewritten := filepath.Join(t.TempDir(), "sess_1.jsonl")
	if err := os.WriteFile(rewritten, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := readFile(rewritten, "sess_1", scroll, keepAll)
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
// scrollback it keeps (13.5 when it held each terminal's output, grown by
// append; 2.2 when it held it in a tailBuf; 0.36 copying the lines).
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

// A rewrite reads back as the file it rewrites: each case is a file's
// lines after its header, and Load must read the same history from both,
// with a scrollback of 4 bytes.
func TestRewriteKeepsWhatLoadReads(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)
	out := func(term, d string) []byte { return appendOut(nil, at, term, []byte(d)) }
	rec := func(r record) []byte { r.At = at; return appendRecord(nil, &r) }
	for _, c := range []struct {
		name  string
		lines [][]byte
	}{
		{"lines within the scrollback", [][]byte{out("term_1", "ab"), out("term_1", "c")}},
		{"whole lines left out", [][]byte{out("term_1", "abcd"), out("term_1", "efgh")}},
		{"the first kept line cut", [][]byte{out("term_1", "abcde"), out("term_1", "fg")}},
		{"two terminals interleaved", [][]byte{out("term_1", "abc"), out("term_2", "12345"), out("term_1", "def"), out("term_2", "6")}},
		{"a gap before and after", [][]byte{rec(record{T: "gap", Term: "term_1", N: 10}), out("term_1", "abcdef"), rec(record{T: "gap", Term: "term_1", N: 3})}},
		{"a forgotten terminal", [][]byte{out("term_1", "abc"), out("term_2", "xy"), rec(record{T: "forget", Item: "term_1"}), rec(record{T: "exit", Term: "term_2", Status: code(0)})}},
		{"a terminal forgotten, then its id again", [][]byte{out("term_1", "abcdef"), rec(record{T: "forget", Item: "term_1"}), out("term_1", "xyz")}},
		{"a line encoding/json wrote", [][]byte{rec(record{T: "out", Term: "term_1", D: json.RawMessage(`"YWJjZGVm"`)}), out("term_1", "g")}},
		{"updates replaced and forgotten", [][]byte{
			rec(record{T: "update", Item: "call_1", U: json.RawMessage(`{"n":1}`)}), rec(record{T: "update", U: json.RawMessage(`{"m":1}`)}),
			rec(record{T: "update", Item: "call_1", U: json.RawMessage(`{"n":2}`)}), rec(record{T: "update", Item: "call_2", U: json.RawMessage(`{"n":3}`)}),
			rec(record{T: "forget", Item: "call_2"}), out("term_1", "abcde"), rec(record{T: "closed"})}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			checkRewrite(t, 4, append(rec(record{T: "session", V: version, ID: "sess_1"}), bytes.Join(c.lines, nil)...))
		})
	}
}

// checkRewrite checks that Load reads the same history, with a scrollback
// of scroll bytes, from file and from its rewrite.
func checkRewrite(t *testing.T, scroll int, file []byte) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "old.jsonl")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rewriteFile(path, scroll, &b); err != nil {
		t.Fatal(err)
	}
	npath := filepath.Join(dir, "new.jsonl")
	if err := os.WriteFile(npath, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	old, err := readFile(path, "sess_1", scroll, keepAll)
	if err != nil {
		t.Fatal(err)
	}
	nw, err := readFile(npath, "sess_1", scroll, keepAll)
	if err != nil {
		t.Fatalf("%v\n%s", err, b.Bytes())
	}
	if o, n := fmt.Sprint(summary(old.history())), fmt.Sprint(summary(nw.history())); o != n {
		t.Errorf("the rewrite reads as another history:\n old %s\n new %s\n%s", o, n, b.Bytes())
	}
}

// FuzzRewrite: a file of out, gap, forget and exit records of three
// terminals, each byte of ops one record.
func FuzzRewrite(f *testing.F) {
	f.Add(uint8(4), []byte{0x13, 0x25, 0x41, 0x80, 0x17, 0xc2, 0x33, 0x40, 0x21})
	f.Add(uint8(4), []byte{0x02, 0x30}) // an empty out line lists its terminal
	f.Fuzz(func(t *testing.T, scroll uint8, ops []byte) {
		at := time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)
		file := appendRecord(nil, &record{T: "session", V: version, ID: "sess_1", At: at})
		for i, op := range ops {
			term := fmt.Sprintf("term_%d", op%3)
			switch op >> 6 {
			case 0, 1: // out, of 0 to 15 bytes
				file = appendOut(file, at, term, fmt.Appendf(nil, "%016d", i)[:op>>2&15])
			case 2:
				file = appendRecord(file, &record{T: "gap", At: at, Term: term, N: int64(op>>2&15 + 1)})
			default:
				if op&4 == 0 {
					file = appendRecord(file, &record{T: "forget", At: at, Item: term})
				} else {
					file = appendRecord(file, &record{T: "exit", At: at, Term: term, Status: code(int(op >> 3 & 7))})
				}
			}
		}
		checkRewrite(t, int(scroll%32), file)
	})
}
