package supervisor

import (
	"slices"
	"strings"
	"testing"
	"time"

	"shellagent/protocol/acptest"
)

// ACP v1 clients attaching to a session from another connection, as a
// daemon's editors do: session/load and session/resume through the v1
// front, under KeepDetached.

// v1Client is a connection whose client speaks ACP v1, advertising
// _meta.terminal_output (meta) or not.
type v1Client struct {
	*harness
	meta bool
}

func (h *harness) connectV1(meta bool) *v1Client {
	h.t.Helper()
	c := h.connectUninitialized(acptest.WithProtocolV1())
	caps := map[string]any{"fs": map[string]bool{"readTextFile": false, "writeTextFile": false}, "terminal": false}
	if meta {
		caps["_meta"] = map[string]any{"terminal_output": true}
	}
	var res struct {
		AgentCapabilities struct{ LoadSession bool }
	}
	c.MustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": caps, "clientInfo": map[string]string{"name": "v1", "version": "1"}}, &res)
	if !res.AgentCapabilities.LoadSession {
		h.t.Fatalf("loadSession not advertised")
	}
	return &v1Client{h.on(c), meta}
}

// v1Servers is the mcpServers of a v1 client's session/new, load and
// resume: a stdio server, as an editor sends those it has. In v1 every
// agent takes stdio servers, and the front ignores them (a v2 client
// sending one is refused: TestMCPServersAreRefused).
var v1Servers = []any{map[string]any{"name": "fs", "command": "/bin/true", "args": []any{}, "env": []any{}}}

func (v *v1Client) newSession() string {
	var res struct {
		SessionID string `json:"sessionId"`
	}
	v.c.MustCall("session/new", map[string]any{"cwd": v.cwd, "mcpServers": v1Servers}, &res)
	return res.SessionID
}

// turn sends a prompt and waits for the end of its turn.
func (v *v1Client) turn(sid, line string) *acptest.Msg {
	v.t.Helper()
	m := v.c.Wait(v.prompt(sid, line))
	if m.Error != nil {
		v.t.Fatalf("prompt %q: %v", line, m.Error)
	}
	return m
}

// attach sends session/load or session/resume and returns the updates of
// the session up to the response (load) or after it, until the commands
// (resume), and the response.
func (v *v1Client) attach(method, sid string) ([]*acptest.Msg, *acptest.Msg) {
	v.t.Helper()
	before := len(v.c.Transcript())
	resp := v.c.Wait(v.c.Send(method, map[string]any{"sessionId": sid, "cwd": v.cwd, "mcpServers": v1Servers}))
	if resp.Error != nil {
		v.t.Fatalf("%s: %v", method, resp.Error)
	}
	cmds := v.c.WaitAfter(resp, "the commands", func(m *acptest.Msg) bool { return m.Kind == "available_commands_update" })
	if method == "session/resume" {
		// The live work follows the commands: wait for its terminal's
		// redraw before reading the transcript.
		v.c.WaitAfter(cmds, "the redraw", func(m *acptest.Msg) bool { return m.SessionID == sid && m.Meta("terminal_output") != nil })
	}
	var out []*acptest.Msg
	for _, m := range v.c.Transcript()[before:] {
		if m.SessionID == sid && m.Method == "session/update" && (method == "session/load" && m.Seq < resp.Seq || method == "session/resume" && m.Seq > cmds.Seq) {
			out = append(out, m)
		}
	}
	return out, resp
}

// kinds renders updates as "KIND[ TOOLCALLID]" lines, a run of output as
// one.
func kinds(msgs []*acptest.Msg) []string {
	var out []string
	for _, m := range msgs {
		l := m.Kind
		switch {
		case m.Meta("terminal_output") != nil:
			l = "output"
		case m.Meta("terminal_exit") != nil:
			l = "exit"
		case m.ToolCallID() != "":
			l += " " + m.ToolCallID()
		}
		if n := len(out); n > 0 && l == "output" && out[n-1] == l {
			continue
		}
		out = append(out, l)
	}
	return out
}

// textOf returns the text of the last update of call in msgs.
func textOf(msgs []*acptest.Msg, call string) string {
	text := ""
	for _, m := range msgs {
		if m.ToolCallID() == call && m.HasKey("content") {
			text = m.Text()
		}
	}
	return text
}

// TestReattachV1LoadAfterTheConnectionWentAway: a v1 editor's connection
// goes away and another one loads the session: its history replayed as v1
// updates before the response, each tool call announced (tool_call) at its
// current state with its terminal drawn from the ring (or the output's
// tail), then live output; /stop and session/close work from there.
func TestReattachV1LoadAfterTheConnectionWentAway(t *testing.T) {
	t.Parallel()
	for _, meta := range []bool{true, false} {
		t.Run(map[bool]string{true: "terminal_output", false: "plain"}[meta], func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, Config{Detached: KeepDetached})
			a := h.connectV1(meta)
			sid := a.newSession()
			a.turn(sid, "echo one")
			bg := "/bg echo two; " + trigger("go") + "; echo three; " + trigger("go2") + "; echo four; sleep 30"
			a.turn(sid, bg)
			a.c.Close()
			// Output while no one is attached fills the ring.
			h.release("go")
			h.await(sid, "three in the ring", func(st *state) bool {
				term := st.work.terminals["term_2"]
				return strings.Contains(string(must(term.ring.Snapshot())), "three")
			})

			b := h.connectV1(meta)
			replayed, _ := b.attach("session/load", sid)
			want := []string{"user_message_chunk", "tool_call call_1", "output", "exit", "user_message_chunk", "tool_call call_2", "output"}
			if !meta {
				want = []string{"user_message_chunk", "tool_call call_1", "tool_call_update call_1", "user_message_chunk", "tool_call call_2", "tool_call_update call_2"}
			}
			if got := kinds(replayed); !slices.Equal(got, want) {
				t.Errorf("the load replayed %q, want %q", got, want)
			}
			if user := replayed[0].Text(); user != "echo one" {
				t.Errorf("the first user message is %q", user)
			}
			if meta {
				for _, m := range replayed {
					if m.Kind == "tool_call" && m.Meta("terminal_info") == nil {
						t.Errorf("announced without its terminal: %s", m.Raw)
					}
				}
				if got := string(b.c.Output(sid, "term_1")); got != "one\r\n" {
					t.Errorf("term_1 drawn as %q", got)
				}
				if got := string(b.c.Output(sid, "term_2")); got != "two\r\nthree\r\n" {
					t.Errorf("term_2 drawn as %q", got)
				}
			} else if tail := textOf(replayed, "call_2"); !strings.Contains(tail, "```\ntwo\nthree\n```") {
				t.Errorf("call_2's tail %q", tail)
			}

			// Then live output, and the stop.
			h.release("go2")
			if meta {
				b.c.WaitFor("four", func(*acptest.Msg) bool { return string(b.c.Output(sid, "term_2")) == "two\r\nthree\r\nfour\r\n" })
			}
			stop := b.turn(sid, "/stop term_2")
			b.c.WaitAfter(stop, "term_2's exit", func(m *acptest.Msg) bool {
				if meta {
					return m.Meta("terminal_exit")["signal"] == "SIGTERM"
				}
				return m.Kind == "agent_message_chunk" && strings.HasSuffix(m.Text(), ") ended: signal SIGTERM.")
			})
			b.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
		})
	}
}

// TestReattachV1WhileTheFirstConnectionStaysOpen: session/load and
// session/resume from a second v1 connection take the session over; the
// first gets nothing more of it, and the second gets each tool call
// announced (tool_call) though the first connection had seen it.
func TestReattachV1WhileTheFirstConnectionStaysOpen(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Detached: KeepDetached})
	a := h.connectV1(true)
	sid := a.newSession()
	a.turn(sid, "/bg echo one; "+trigger("go")+"; echo two; sleep 30")
	a.c.WaitFor("one", func(*acptest.Msg) bool { return string(a.c.Output(sid, "term_1")) == "one\r\n" })

	var last *v1Client
	for _, method := range []string{"session/resume", "session/load"} {
		b := h.connectV1(true)
		got, _ := b.attach(method, sid)
		want := []string{"tool_call call_1", "output"}
		if method == "session/load" {
			want = slices.Insert(want, 0, "user_message_chunk")
		}
		if !slices.Equal(kinds(got), want) {
			t.Errorf("%s: got %q, want %q", method, kinds(got), want)
		}
		if out := string(b.c.Output(sid, "term_1")); out != "one\r\n" {
			t.Errorf("%s: term_1 drawn as %q", method, out)
		}
		last = b
	}
	// A is told once that another client took the session (the first
	// attach took it from A, the second from the first attach); nothing
	// of the session's work reaches it after that.
	a.c.WaitFor("A told the session was taken", func(m *acptest.Msg) bool {
		return m.SessionID == sid && strings.Contains(string(m.Raw), "Another client took this session")
	})
	seen := len(a.c.Transcript())
	h.release("go")
	last.c.WaitFor("two", func(*acptest.Msg) bool { return string(last.c.Output(sid, "term_1")) == "one\r\ntwo\r\n" })
	time.Sleep(200 * time.Millisecond) // what A's writer would send is on its way
	a.c.MustCall("session/list", map[string]any{}, nil)
	for _, m := range a.c.Transcript()[seen:] {
		if m.SessionID == sid {
			t.Errorf("A got %s after another connection took the session", m.Raw)
		}
	}
}
