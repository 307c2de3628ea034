package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"shellagent/acp"
	"shellagent/protocol/acptest"
)

// longText is about n bytes of generated Go source, with what a shell's
// quoting would trip on ('"$`\ and a line without a newline in the
// middle of none), ending in newlines.
func longText(n int) string {
	var b strings.Builder
	b.WriteString("package big\n\n")
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "var v%d = \"it's $HOME `pwd` \\\\ %%s\" // '\"' %d\n", i, i)
	}
	b.WriteString("\n\n")
	return b.String()
}

// A prompt longer than the kernel takes in one argument (128 KiB) runs
// as a shorter one does, with each shell of the Bourne family: a heredoc
// an agent sends to write a generated file writes it byte for byte, and
// an echo prints its word, in the foreground and under /bg.
func TestLongPromptRuns(t *testing.T) {
	for _, shell := range []string{"/bin/sh", "/bin/bash"} {
		t.Run(filepath.Base(shell), func(t *testing.T) {
			t.Parallel()
			a := startAgent(t, "--shell", shell)
			sid := a.session()

			content := longText(300 << 10)
			a.prompt(sid, "cat > big.go <<'EOF'\n"+content+"EOF\necho \"$0 $#\"")
			a.ended(sid, "call_1", acp.StatusCompleted)
			if es := a.exitStatus(sid, "term_1"); es["exitCode"] != 0.0 {
				t.Fatalf("heredoc: exitStatus %v, output %q", es, a.c.Output(sid, "term_1"))
			}
			if got, want := string(a.c.Output(sid, "term_1")), shell+" 0\r\n"; got != want {
				t.Errorf("heredoc: output %q, want %q", got, want)
			}
			got, err := os.ReadFile(filepath.Join(a.cwd, "big.go"))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != content {
				t.Errorf("big.go has %d bytes, not the heredoc's %d", len(got), len(content))
			}
			// The session's title, which every session/list sends, is the
			// prompt's first line, not the file's worth that follows.
			var list acp.ListSessionsResponse
			a.c.MustCall("session/list", map[string]any{}, &list)
			const title = "cat > big.go <<'EOF' …"
			if len(list.Sessions) == 0 {
				t.Fatal("session/list lists no session")
			}
			if len(list.Sessions) != 1 || list.Sessions[0].Title != title {
				t.Errorf("session/list: %d sessions, the first titled %.80q (%d bytes); want one titled %q",
					len(list.Sessions), list.Sessions[0].Title, len(list.Sessions[0].Title), title)
			}

			word := strings.Repeat("0123456789abcdef", 300<<10/16)
			a.prompt(sid, "echo "+word+"; exit 3\n\n")
			a.ended(sid, "call_2", acp.StatusFailed) // exit 3
			if es := a.exitStatus(sid, "term_2"); es["exitCode"] != 3.0 {
				t.Errorf("echo: exitStatus %v", es)
			}
			if out := string(a.c.Output(sid, "term_2")); out != word+"\r\n" {
				t.Errorf("echo printed %d bytes (%.80q…), want the word's %d and CRLF", len(out), out, len(word))
			}

			a.prompt(sid, "/bg echo "+word)
			if es := a.exitStatus(sid, "term_3"); es["exitCode"] != 0.0 {
				t.Errorf("/bg echo: exitStatus %v", es)
			}
			if out := string(a.c.Output(sid, "term_3")); out != word+"\r\n" {
				t.Errorf("/bg echo printed %d bytes (%.80q…), want the word's %d and CRLF", len(out), out, len(word))
			}
		})
	}
}

// ended waits for tool call call to end, and fails the test, with what
// the tool call says, unless it ended with status want.
func (a *agent) ended(sid, call, want string) {
	a.t.Helper()
	m := a.c.WaitFor(call+" ended", func(m *acptest.Msg) bool {
		return m.SessionID == sid && m.ToolCallID() == call && (m.Status() == acp.StatusCompleted || m.Status() == acp.StatusFailed)
	})
	if m.Status() != want {
		text := m.Text()
		if len(text) > 300 {
			text = text[:150] + " … " + text[len(text)-150:]
		}
		a.t.Fatalf("%s %s, want %s: %s", call, m.Status(), want, text)
	}
}

// The daemon runs a long prompt as the agent on stdio does, from a
// relay.
func TestLongPromptRunsInTheDaemon(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	r := d.relay()
	sid := r.session(d.cwd)
	word := strings.Repeat("0123456789abcdef", 300<<10/16)
	r.prompt(sid, "echo "+word)
	m := r.c.WaitFor("term_1 exitStatus", func(m *acptest.Msg) bool {
		return m.SessionID == sid && m.TerminalID() == "term_1" && m.ExitStatus() != nil
	})
	if es := m.ExitStatus(); es["exitCode"] != 0.0 {
		t.Errorf("exitStatus %v", es)
	}
	if out := string(r.c.Output(sid, "term_1")); out != word+"\r\n" {
		t.Errorf("echo printed %d bytes (%.80q…), want the word's %d and CRLF", len(out), out, len(word))
	}
}
