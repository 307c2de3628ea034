package terminput

import (
	"errors"
	"strings"
	"testing"

	"shellagent/acp"
	"shellagent/supervisor/work/worktest"
)

func TestType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		t    worktest.Terminal // term_1, the session's one terminal
		id   string
		code int64  // of the error, 0 for none
		want string // in its message
	}{
		{id: "term_1"},
		{id: "term_9", code: acp.CodeInvalidParams, want: `no terminal "term_9"`},
		{t: worktest.Terminal{ExitStatus: &acp.ExitStatus{}}, id: "term_1", code: acp.CodeInvalidParams, want: "has already exited"},
		{t: worktest.Terminal{Unstarted: true}, id: "term_1", code: acp.CodeInvalidParams, want: "has not started yet"},
		{t: worktest.Terminal{InputCap: 2}, id: "term_1", code: acp.CodeRequestCancelled, want: "(2 of 4 bytes were written)"},
	}
	for i, tc := range tests {
		h := worktest.NewHost()
		term := h.AddTerminal("term_1", &tc.t)
		err := Type(h, tc.id, []byte("yes\r"))
		pe, _ := errors.AsType[*acp.Error](err)
		switch {
		case tc.code == 0 && err != nil:
			t.Errorf("case %d: %v", i, err)
		case tc.code == 0 && string(term.Typed) != "yes\r":
			t.Errorf("case %d: typed %q", i, term.Typed)
		case tc.code != 0 && (pe == nil || pe.Code != tc.code || !strings.Contains(pe.Message, tc.want)):
			t.Errorf("case %d: error %v, want code %d saying %q", i, err, tc.code, tc.want)
		}
	}
}

func TestSendAndSetSize(t *testing.T) {
	t.Parallel()
	h := worktest.NewHost()
	term := h.AddTerminal("term_1", nil)
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
		if i >= len(h.Said) || !strings.HasPrefix(h.Said[i], w) {
			t.Fatalf("said %q, want %q", h.Said, want)
		}
	}
	if term.Size != (acp.TerminalSize{Cols: 100, Rows: 40}) {
		t.Errorf("size %+v", term.Size)
	}
}
