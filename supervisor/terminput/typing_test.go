package terminput

import (
	"errors"
	"strings"
	"testing"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/ptyio"
	"shellagent/supervisor/work"
)

// host is a session with one terminal, term_1, that says what it is
// told; it has nothing else (the embedded work.Host is nil).
type host struct {
	work.Host
	t    *terminal
	said []string
}

func (h *host) Terminal(id string) work.Terminal {
	if h.t == nil || id != "term_1" {
		return nil
	}
	return h.t
}

func (h *host) Say(text string) { h.said = append(h.said, text) }

type terminal struct {
	exited, started bool
	full            bool // the input buffer takes 2 bytes
	typed           []byte
	size            acp.TerminalSize
}

func (t *terminal) ID() string              { return "term_1" }
func (t *terminal) Output() *outputbuf.Ring { return nil }
func (t *terminal) Exited() bool            { return t.exited }
func (t *terminal) Exit() *acp.ExitStatus   { return nil }
func (t *terminal) Launched() bool          { return t.started }

func (t *terminal) Write(data []byte) (int, error) {
	if t.full && len(data) > 2 {
		t.typed = append(t.typed, data[:2]...)
		return 2, ptyio.ErrInputFull
	}
	t.typed = append(t.typed, data...)
	return len(data), nil
}

func (t *terminal) Resize(size acp.TerminalSize) error { t.size = size; return nil }

func TestType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		t    *terminal
		id   string
		code int64  // of the error, 0 for none
		want string // in its message
	}{
		{t: &terminal{started: true}, id: "term_1"},
		{t: &terminal{started: true}, id: "term_9", code: acp.CodeInvalidParams, want: `no terminal "term_9"`},
		{t: &terminal{started: true, exited: true}, id: "term_1", code: acp.CodeInvalidParams, want: "has already exited"},
		{t: &terminal{}, id: "term_1", code: acp.CodeInvalidParams, want: "has not started yet"},
		{t: &terminal{started: true, full: true}, id: "term_1", code: acp.CodeRequestCancelled, want: "(2 of 4 bytes were written)"},
	}
	for i, tc := range tests {
		err := Type(&host{t: tc.t}, tc.id, []byte("yes\r"))
		pe, _ := errors.AsType[*acp.Error](err)
		switch {
		case tc.code == 0 && err != nil:
			t.Errorf("case %d: %v", i, err)
		case tc.code == 0 && string(tc.t.typed) != "yes\r":
			t.Errorf("case %d: typed %q", i, tc.t.typed)
		case tc.code != 0 && (pe == nil || pe.Code != tc.code || !strings.Contains(pe.Message, tc.want)):
			t.Errorf("case %d: error %v, want code %d saying %q", i, err, tc.code, tc.want)
		}
	}
}

func TestSendAndSetSize(t *testing.T) {
	t.Parallel()
	h := &host{t: &terminal{started: true}}
	Send(h, "term_1", Args{Data: []byte("\x03"), What: "C-c"})
	SetSize(h, "term_1", acp.TerminalSize{Cols: 100, Rows: 40})
	SetSize(h, "term_1", acp.TerminalSize{Cols: 0, Rows: 40})
	Send(h, "term_2", Args{Data: []byte("\r"), What: "Enter"})
	want := []string{
		"Typed C-c into term_1.",
		"Resized term_1 to 100 columns and 40 rows.",
		"Cannot resize term_1: ",
		`Cannot type into term_2: terminalId: no terminal "term_2" in this session.`,
	}
	for i, w := range want {
		if i >= len(h.said) || !strings.HasPrefix(h.said[i], w) {
			t.Fatalf("said %q, want %q", h.said, want)
		}
	}
	if h.t.size != (acp.TerminalSize{Cols: 100, Rows: 40}) {
		t.Errorf("size %+v", h.t.size)
	}
}
