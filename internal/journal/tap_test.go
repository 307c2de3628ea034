package journal

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"shellagent/outputbuf"
)

// testTerms are the terminals tests write output to, by Store, session
// and terminal: a ring each, as a PTY reader has, attached to its Store
// at its first output. A ring keeps twice the Store's scrollback, so
// that what the Store keeps is its own cut, not the ring's.
var testTerms = struct {
	sync.Mutex
	m map[testTermKey]*testTerm
}{m: make(map[testTermKey]*testTerm)}

type testTermKey struct {
	s        *Store
	id, term string
}

type testTerm struct {
	ring *outputbuf.Ring
	tap  *Tap
}

// output writes p as output of terminal term of session id, as a
// terminal of the supervisor does: into its ring, then telling the Store.
func output(s *Store, id, term string, p []byte) {
	k := testTermKey{s, id, term}
	testTerms.Lock()
	t := testTerms.m[k]
	if t == nil {
		t = &testTerm{ring: outputbuf.New(2 * s.opts.Scrollback)}
		t.tap = s.Attach(id, term, t.ring)
		testTerms.m[k] = t
	}
	testTerms.Unlock()
	t.ring.Write(p)
	t.tap.Wrote()
}

// oneTerminal opens a Store with session sess_1 and its terminal
// term_1 attached to a ring of DefaultScrollback, and returns a 4 KiB
// chunk of output.
func oneTerminal(tb testing.TB) (*Store, *outputbuf.Ring, *Tap, []byte) {
	s := open(tb, Options{Dir: tb.TempDir()})
	s.Create("sess_1", Meta{Cwd: "/p"})
	ring := outputbuf.New(DefaultScrollback)
	return s, ring, s.Attach("sess_1", "term_1", ring), bytes.Repeat([]byte("0123456789abcdef"), 256)
}

// TestAttachGoesOnFromTheFile: a terminal handed over to a new agent (an
// upgrade in place: its ring restored with its offsets) is attached to
// the new agent's Store, which goes on from what the file has: the bytes
// the old agent wrote are not written twice, and those it had not read
// yet are not lost.
func TestAttachGoesOnFromTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	s.Create("sess_1", Meta{Cwd: "/p"})
	ring := outputbuf.New(1 << 10)
	tap := s.Attach("sess_1", "term_1", ring)
	ring.Write([]byte("one,"))
	tap.Wrote()
	s.Close()
	ring.Write([]byte("two,")) // after the old agent's last read

	data, end := ring.Snapshot()
	handed, err := outputbuf.Restore(ring.Cap(), data, end)
	if err != nil {
		t.Fatal(err)
	}
	s2 := open(t, Options{Dir: dir})
	s2.Reopen("sess_1")
	tap = s2.Attach("sess_1", "term_1", handed)
	handed.Write([]byte("three"))
	tap.Wrote()
	h, err := s2.Load("sess_1")
	if err != nil {
		t.Fatal(err)
	}
	check(t, h, want{cwd: "/p", terms: map[string]string{"term_1": "one,two,three"}, written: map[string]int64{"term_1": 13}})
}

// TestOutputCostsNoAllocation: writing output with history costs the
// terminal its ring's write and nothing else: no copy for the history,
// no allocation.
func TestOutputCostsNoAllocation(t *testing.T) {
	s, ring, tap, chunk := oneTerminal(t)
	ring.Write(bytes.Repeat(chunk, DefaultScrollback/len(chunk))) // the ring at its full size
	tap.Wrote()
	s.Flush() // the writer idle, its file open
	if a := testing.AllocsPerRun(1000, func() {
		ring.Write(chunk)
		tap.Wrote()
	}); a != 0 {
		t.Errorf("%v allocations a chunk", a)
	}
	h, err := s.Load("sess_1")
	if err != nil {
		t.Fatal(err)
	}
	if o := h.Terminals["term_1"]; o == nil || o.Written != DefaultScrollback+1001*int64(len(chunk)) {
		t.Errorf("Load: %+v", o)
	}
}

// TestParseOut: an out line as appendOut writes it reads as
// encoding/json reads it; any other line is left to encoding/json.
func TestParseOut(t *testing.T) {
	at := time.Date(2026, 12, 2, 7, 0, 0, 123456789, time.UTC)
	good := [][]byte{
		appendOut(nil, at, "term_1", []byte("hello\r\n")),
		appendOut(nil, at, "term_2", nil),
		appendOut(nil, at.Truncate(time.Second), "t", bytes.Repeat([]byte{0, 255, '"', '\\'}, 1000)),
	}
	for _, line := range good {
		var fast, slow record
		if !parseOut(line, &fast) {
			t.Errorf("not read: %.80s", line)
			continue
		}
		if err := json.Unmarshal(line, &slow); err != nil {
			t.Fatal(err)
		}
		if fast.T != slow.T || !fast.At.Equal(slow.At) || fast.Term != slow.Term || !bytes.Equal(fast.D, slow.D) {
			t.Errorf("%.80s: read as %+v, encoding/json reads %+v", line, fast, slow)
		}
	}
	for _, line := range []string{
		`{"t":"out","at":"2026-12-02T07:00:00Z","term":"a\"b","d":"aGk="}` + "\n",
		`{"t":"out","at":"2026-12-02T07:00:00Z","term":"a","d":"aGk=","n":1}` + "\n",
		`{"t":"out","at":"yesterday","term":"a","d":"aGk="}` + "\n",
		`{"t":"out","at":"2026-12-02T07:00:00Z","term":"a","d":"aG\u006b="}` + "\n",
		`{"t":"gap","at":"2026-12-02T07:00:00Z","term":"a","n":3}` + "\n",
		`{"t":"out","at":"2026-12-02T07:00:00Z","term":"a","d":"aGk="}`,
	} {
		var rec record
		if parseOut([]byte(line), &rec) {
			t.Errorf("read %q as %+v: it is not appendOut's", line, rec)
		}
	}
}
