package lineclient

import (
	"bytes"
	"context"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"
	"golang.org/x/term"
)

func TestEditKeys(t *testing.T) {
	for _, tc := range []struct {
		name, in, keys, rest string
	}{
		{"text", "echo hé\r", "echo hé\r", ""},
		{"editing keys", "\x01\x05\x0b\x15\x17\x7f\x04\x03", "\x01\x05\x0b\x15\x17\x7f\x04\x03", ""},
		{"cursor keys", "\x1b[A\x1b[B\x1b[C\x1b[D\x1b[H\x1b[F\x1b[3~", "\x1b[A\x1b[B\x1b[C\x1b[D\x1b[H\x1b[F\x1b[3~", ""},
		{"application cursor keys", "\x1bOA\x1bOH", "\x1b[A\x1b[H", ""},
		{"home and end as vt220 keys", "\x1b[1~\x1b[4~\x1b[7~\x1b[8~", "\x1b[H\x1b[F\x1b[H\x1b[F", ""},
		{"ctrl-arrows are word moves", "\x1b[1;5C\x1b[1;5D", "\x1b[1;3C\x1b[1;3D", ""},
		{"cursor position report", "ls\x1b[12;1R -l", "ls -l", ""},
		{"device attributes", "\x1b[?62;22cx", "x", ""},
		{"focus events", "\x1b[Ia\x1b[Ob", "ab", ""},
		{"osc reply, BEL", "\x1b]11;rgb:0000/0000/0000\x07ok", "ok", ""},
		{"osc reply, ST", "\x1b]10;rgb:ffff/ffff/ffff\x1b\\ok", "ok", ""},
		{"dcs reply", "\x1bP1$r0m\x1b\\ok", "ok", ""},
		{"function keys", "\x1b[15~\x1bOPa", "a", ""},
		{"alt chords", "\x1bb\x1bfz", "z", ""},
		{"escape then a key", "\x1b\x1b[A", "\x1b[A", ""},
		{"lone escape at the end is the Escape key", "ab\x1b", "ab", ""},
		{"tab and other controls", "a\tb\x00\x1a\x1c\x07c", "abc", ""},
		{"a C1 control", "a\u009bb", "ab", ""},
		{"not UTF-8", "a\xffb", "ab", ""},
		{"a report cut by the read", "ls\x1b[12;", "ls", "\x1b[12;"},
		{"an osc cut by the read", "\x1b]11;rgb:00", "", "\x1b]11;rgb:00"},
		{"a character cut by the read", "h\xc3", "h", "\xc3"},
		{"a broken csi ends at the first odd byte", "\x1b[12\rx", "\rx", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, rest := editKeys([]byte(tc.in))
			if string(keys) != tc.keys || string(rest) != tc.rest {
				t.Errorf("editKeys(%q) = %q, %q; want %q, %q", tc.in, keys, rest, tc.keys, tc.rest)
			}
		})
	}
	// The rest of a cut read, put before the next, completes it.
	keys, rest := editKeys([]byte("ls\x1b[12;"))
	more, _ := editKeys(append(rest, "1R -l\r"...))
	if got := string(keys) + string(more); got != "ls -l\r" {
		t.Errorf("a report cut in two left %q", got)
	}
}

// FuzzEditKeys: whatever the terminal sends, the editor gets UTF-8 text,
// the controls it knows and the sequences it knows, and nothing more.
func FuzzEditKeys(f *testing.F) {
	for _, s := range []string{"echo hi\r", "\x1b[12;1R", "\x1b]11;rgb:0/0/0\x07", "\x1b[A\x1bOB", "a\x1b", "\xc3\xa9\x1b[3~", "\x1bP+q\x1b\\"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		keys, rest := editKeys(in)
		if len(rest) > maxSeq || !bytes.HasSuffix(in, rest) {
			t.Fatalf("rest %q is not a short end of %q", rest, in)
		}
		for i := 0; i < len(keys); {
			switch c := keys[i]; {
			case c == keyEsc:
				n := seqLen(keys[i:])
				if n == 0 || editorKey(keys[i:i+n]) == nil {
					t.Fatalf("editKeys(%q) let %q through", in, keys[i:])
				}
				i += n
			case c < 0x20 || c == keyDelete:
				if !editControl(c) {
					t.Fatalf("editKeys(%q) let control %#x through", in, c)
				}
				i++
			default:
				r, n := utf8.DecodeRune(keys[i:])
				if r == utf8.RuneError || (r >= 0x80 && r <= 0x9f) {
					t.Fatalf("editKeys(%q) let %q through", in, keys[i:])
				}
				i += n
			}
		}
	})
}

func TestAltScreen(t *testing.T) {
	var a altScreen
	for _, tc := range []struct {
		chunk string
		on    bool
		enter int
	}{
		{"plain\r\n", false, -1},
		{"\x1b[?1049h\x1b[Hvim", true, 8},
		{"more", true, -1},
		{"\x1b[?10", true, -1}, // the switch back, cut in two
		{"49l$ ", false, -1},
		{"\x1b[?47h", true, 6},
		{"\x1b[?47lx\x1b[?1047h", true, 15},
	} {
		if enter := a.scan([]byte(tc.chunk)); a.on != tc.on || enter != tc.enter {
			t.Errorf("after %q: on %v, enter %d; want %v, %d", tc.chunk, a.on, enter, tc.on, tc.enter)
		}
	}
}

func TestLineStartAfter(t *testing.T) {
	for _, tc := range []struct {
		data  string
		start bool
		want  bool
	}{
		{"hi\r\n", false, true},
		{"hi", true, false},
		{"\x1b[0m\x1b]0;title\x07", true, true},
		{"x\x1b[?1049l", false, true},
		{"\x1b[?1049lx", false, false},
		{"\r", false, false},
		{"", true, true},
		{"a\n\x1b[3", false, true},
	} {
		if got := lineStartAfter([]byte(tc.data), tc.start); got != tc.want {
			t.Errorf("lineStartAfter(%q, %v) = %v", tc.data, tc.start, got)
		}
	}
}

// The keys a read returns along with the end of the input are read
// keys: readKeys sends them before the end.
func TestReadKeysDataWithEOF(t *testing.T) {
	out, done := make(chan inputEvent), make(chan struct{})
	defer close(done)
	go readKeys(iotest.DataErrReader(strings.NewReader("ab\x02b")), out, done)
	var keys []byte
	for ev := range out {
		if ev.eof {
			break
		}
		keys = append(keys, ev.keys...)
	}
	if string(keys) != "ab\x02b" {
		t.Errorf("keys read: %q, want %q", keys, "ab\x02b")
	}
}

func TestHasInputMethods(t *testing.T) {
	for _, tc := range []struct {
		meta string
		want bool
	}{
		{`{"shellagent":{"methods":["_shellagent/terminal/write","_shellagent/terminal/resize"]}}`, true},
		{`{"shellagent":{"methods":["_shellagent/terminal/write"]}}`, false},
		{`{"other":{}}`, false},
		{``, false},
		{`{"shellagent":{"methods":"_shellagent/terminal/write"}}`, false},
	} {
		if got := hasInputMethods([]byte(tc.meta)); got != tc.want {
			t.Errorf("hasInputMethods(%s) = %v", tc.meta, got)
		}
	}
}

// ptyScreen collects what the client writes to its terminal.
type ptyScreen struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	done chan struct{}
}

func (s *ptyScreen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *ptyScreen) await(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s.mu.Lock()
		got := s.buf.String()
		s.mu.Unlock()
		if strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the terminal never showed %q; it shows %q", want, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Terminal mode in process: raw mode while it runs and restored after,
// the prompt, a command that has the keyboard (the fake agent echoes what
// is typed), the prompt again, and no goroutine left (TestMain's goleak).
func TestTerminalMode(t *testing.T) {
	master, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	before, err := term.GetState(int(tty.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	scr, ran, press := runOnTerminal(t, master, tty)
	scr.await(t, "[session started in /]\r\n> ")
	if state, err := term.GetState(int(tty.Fd())); err != nil || reflect.DeepEqual(state, before) {
		t.Errorf("the terminal is not in raw mode while the client runs (%v)", err)
	}
	press("cat\r")
	scr.await(t, "[term_t: keys go to the command; Ctrl-B b: background, Ctrl-B c: cancel]\r\n")
	press("typed\r\x02\x02")
	scr.await(t, "typed\r\n\x02")
	press("\x04")
	scr.await(t, "[term_t ended: exit 0]\r\n> ")
	press("/help\r")
	scr.await(t, "/stop")
	press("\x04")
	awaitRun(t, ran)
	if after, err := term.GetState(int(tty.Fd())); err != nil || !reflect.DeepEqual(after, before) {
		t.Errorf("the terminal's mode was not restored (%v)", err)
	}
	closeTerminal(tty, scr, press)
}

// A command that passes the foreground timeout while it has the screen
// is said to have moved to the background, at once, as line mode says it;
// it keeps the keyboard. Issue 23: in terminal mode it moved silently (the
// note was held until the command let go of the screen).
func TestTerminalModeForegroundTimeout(t *testing.T) {
	master, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	scr, ran, press := runOnTerminal(t, master, tty)
	scr.await(t, "[session started in /]\r\n> ")
	press("slowcat\r")
	scr.await(t, "[term_t: keys go to the command; Ctrl-B b: background, Ctrl-B c: cancel]\r\npartial\r\n"+
		"[call_s completed: Still running after the 1s foreground timeout: moved to the background.]\r\n"+
		"[term_t keeps the keyboard and the screen; Ctrl-B d: the prompt, Ctrl-B c: stop it]\r\n")
	press("typed\r")
	scr.await(t, "typed\r\n")
	press("\x04")
	scr.await(t, "[term_t ended: exit 0]\r\n")
	press("\x04")
	awaitRun(t, ran)
	closeTerminal(tty, scr, press)
}

// runOnTerminal runs the client in terminal mode on tty (master's other
// end) against the fake agent with its terminal methods; it returns the
// screen the master shows, Run's result, and press, which types on the
// terminal.
func runOnTerminal(t *testing.T, master, tty *os.File) (*ptyScreen, <-chan error, func(string)) {
	t.Helper()
	scr := &ptyScreen{done: make(chan struct{})}
	go func() {
		defer close(scr.done)
		_, _ = bytesCopy(scr, master) // Safe: ends when the test closes the terminal.
	}()
	cfg := withFake(t, Config{Input: tty, Output: tty, Terminal: tty, Interactive: true}, "1")
	cfg.Env = append(cfg.Env, "LINECLIENT_FAKE_METHODS=1")
	ran := make(chan error, 1)
	go func() { ran <- Run(context.Background(), cfg) }()
	press := func(s string) {
		if _, err := master.WriteString(s); err != nil {
			t.Error(err)
		}
	}
	return scr, ran, press
}

// awaitRun waits up to 20 s for Run to return, and reports its error.
func awaitRun(t *testing.T, ran <-chan error) {
	t.Helper()
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}
}

// closeTerminal ends a terminal-mode test. The client's reader is blocked
// reading the terminal, which Close would not end: a line does (the
// terminal is in canonical mode again), and it returns as Run has. Then
// the master's reader ends with the last descriptor of the terminal.
func closeTerminal(tty *os.File, scr *ptyScreen, press func(string)) {
	press("\n")
	time.Sleep(100 * time.Millisecond)
	tty.Close()
	<-scr.done
}

// bytesCopy copies r to w until r fails.
func bytesCopy(w *ptyScreen, r *os.File) (int, error) {
	buf := make([]byte, 4096)
	total := 0
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n]) // Safe: a buffer.
			total += n
		}
		if err != nil {
			return total, err
		}
	}
}

// TestCRLFWriter: while raw, each "\n" of the agent's stderr not after a
// "\r" becomes "\r\n", a "\r\n" cut between two writes included; while not,
// the bytes pass as they are.
func TestCRLFWriter(t *testing.T) {
	var out bytes.Buffer
	raw := new(atomic.Bool)
	w := &crlfWriter{w: &out, raw: raw}
	write := func(s string) {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	write("cooked\n")
	raw.Store(true)
	write("one\ntwo\r\nthree\r")
	write("\nfour\n\n")
	raw.Store(false)
	write("cooked again\n")
	if want := "cooked\none\r\ntwo\r\nthree\r\nfour\r\n\r\ncooked again\n"; out.String() != want {
		t.Errorf("wrote %q, want %q", out.String(), want)
	}
}
