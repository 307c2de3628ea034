package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"shellagent/protocol/acptest"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/transcripts/*.jsonl from this run")

// transcriptDir holds the golden transcripts.
const transcriptDir = "../../testdata/transcripts"

// TestTranscripts runs each scenario against the real agent and compares
// the exchange, line by line in both directions, with its golden
// transcript in testdata/transcripts. With -update it rewrites them.
//
// Each scenario waits for the message that ends what the agent does in
// answer to a request before it sends the next one, and each line the
// client sends is placed right after the last message the scenario waited
// for, so the transcript does not depend on timing. What varies between
// runs is normalised: the working directory, the agent's version, its
// containment mode, pids and the processes /ps lists, ages and times, how
// long a /wait waited, and how terminal output is cut into chunks
// (consecutive chunks of a terminal are merged into one line; so are v1's
// terminal_output updates, see mergeV1Output).
func TestTranscripts(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, sc := range scenarios {
		seen[sc.name+".jsonl"] = true
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			s := startScriptWith(t, sc.opts, sc.args...)
			sc.run(s)
			checkGolden(t, filepath.Join(transcriptDir, sc.name+".jsonl"), s.finish())
		})
	}
	checkOrphans(t, transcriptDir, seen)
}

// checkGolden compares a run's transcript with the golden one at path, or
// with -update writes it there.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/shellagent -run TestTranscripts -update to create it)", err)
	}
	if d := lineDiff(want, got); d != "" {
		t.Errorf("%s differs from this run (-golden +run); if the change is intended, run go test ./cmd/shellagent -run TestTranscripts -update and review the diff:\n%s", path, d)
	}
}

// checkOrphans reports the transcripts in dir that no scenario wrote.
func checkOrphans(t *testing.T, dir string, seen map[string]bool) {
	t.Helper()
	if *updateGolden {
		return
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl")) // Safe: the pattern is valid.
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("%s belongs to no scenario", f)
		}
	}
}

// script drives one scenario and records what the client sends.
type script struct {
	t      *testing.T
	c      *acptest.Client
	cwd    string
	sid    string
	nextID int
	last   *acptest.Msg // the last message waited for
	sends  []sentLine
}

// sentLine is a line the client sent, placed before transcript message
// after.
type sentLine struct {
	after int
	line  string
}

// startScriptWith starts the agent with args, read by a strict client
// with opts. It keeps no history: the transcripts show the protocol of one
// agent's life (history_test.go shows what outlives it).
func startScriptWith(t *testing.T, opts []acptest.Option, args ...string) *script {
	c, _ := acptest.StartBinary(t, binary, append([]string{"--shell", "/bin/sh", "--sequential-ids", "--history", "off"}, args...), []string{noRaceExitDelay}, opts...)
	return &script{t: t, c: c, cwd: t.TempDir()}
}

// raw sends a line as it is.
func (s *script) raw(line string) {
	after := 0
	if s.last != nil {
		after = s.last.Seq + 1
	}
	s.sends = append(s.sends, sentLine{after, line})
	s.c.SendRaw([]byte(line))
}

// encode marshals v without HTML escapes, failing the test if it cannot.
func (s *script) encode(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		s.t.Fatal(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// request is a request or notification as the script writes it.
type request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int    `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// send sends a request and returns its id.
func (s *script) send(method string, params any) int {
	s.nextID++
	s.raw(s.encode(request{"2.0", s.nextID, method, params}))
	return s.nextID
}

// notify sends a notification.
func (s *script) notify(method string, params any) {
	s.raw(s.encode(request{JSONRPC: "2.0", Method: method, Params: params}))
}

// await waits for the next message that satisfies pred.
func (s *script) await(desc string, pred func(*acptest.Msg) bool) *acptest.Msg {
	s.t.Helper()
	m := s.c.WaitAfter(s.last, desc, pred)
	s.last = m
	return m
}

// response waits for the response to request id.
func (s *script) response(id int) *acptest.Msg {
	s.t.Helper()
	want := fmt.Sprint(id)
	return s.await("the response to request "+want, func(m *acptest.Msg) bool { return m.IsResponse() && string(m.ID) == want })
}

// call sends a request and waits for its response.
func (s *script) call(method string, params any) *acptest.Msg {
	s.t.Helper()
	return s.response(s.send(method, params))
}

// idle waits for a state_update idle with the stop reason ("" for a
// repeated snapshot without one) and n background items.
func (s *script) idle(stopReason string, n int) *acptest.Msg {
	s.t.Helper()
	return s.await(fmt.Sprintf("idle %q with %d listed", stopReason, n), func(m *acptest.Msg) bool {
		return m.State() == "idle" && m.StopReason() == stopReason && m.Background() != nil && len(m.Background()) == n
	})
}

// output waits for the output chunk of terminal id that completes want.
func (s *script) output(id, want string) *acptest.Msg {
	s.t.Helper()
	return s.await(id+" output "+want, func(m *acptest.Msg) bool {
		if m.Kind != "terminal_output_chunk" || m.TerminalID() != id {
			return false
		}
		var out []byte // the terminal's output up to m
		for _, c := range s.c.Transcript()[:m.Seq+1] {
			if c.Kind == "terminal_output_chunk" && c.TerminalID() == id {
				data, _ := c.Update["data"].(string)
				b, _ := base64.StdEncoding.DecodeString(data) // Safe: acptest reports bad chunks.
				out = append(out, b...)
			}
		}
		return strings.Contains(string(out), want)
	})
}

// cancelTerminal sends terminal/cancel and waits for its answer, then for
// the snapshot that leaves n items listed.
func (s *script) cancelTerminal(id string, n int) {
	s.t.Helper()
	s.call("terminal/cancel", map[string]string{"sessionId": s.sid, "terminalId": id})
	s.idle("", n)
}

// open initializes and creates a session.
func (s *script) open() {
	s.t.Helper()
	s.call("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "transcript", "version": "1"}})
	m := s.call("session/new", map[string]any{"cwd": s.cwd})
	var res struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil {
		s.t.Fatal(err)
	}
	s.sid = res.SessionID
}

// prompt sends a text prompt and waits for its response.
func (s *script) prompt(text string) *acptest.Msg {
	s.t.Helper()
	return s.response(s.sendPrompt(text))
}

func (s *script) sendPrompt(text string) int {
	return s.send("session/prompt", map[string]any{"sessionId": s.sid, "prompt": []map[string]string{{"type": "text", "text": text}}})
}

// set sets a config option.
func (s *script) set(id, value string) {
	s.t.Helper()
	s.call("session/set_config_option", map[string]any{"sessionId": s.sid, "configId": id, "type": "id", "value": value})
}

// finish closes the agent's stdin, waits for the end of its output, checks
// the RFD's ordering rules, and returns the normalised transcript.
func (s *script) finish() []byte {
	s.t.Helper()
	s.c.Close()
	s.c.Check()
	msgs := s.c.Transcript()
	var lines []goldenLine
	next := 0
	for i := 0; i <= len(msgs); i++ {
		for ; next < len(s.sends) && s.sends[next].after <= i; next++ {
			lines = append(lines, goldenLine{from: "client", raw: s.sends[next].line})
		}
		if i < len(msgs) {
			lines = append(lines, goldenLine{from: "agent", raw: string(msgs[i].Raw)})
		}
	}
	return render(mergeV1Output(mergeChunks(lines)), s.cwd)
}

// goldenLine is one line of a transcript before rendering.
type goldenLine struct {
	from string // "client" or "agent"
	raw  string
	text string // decoded terminal output, for chunks
}

// chunkPattern matches a terminal_output_chunk as the agent writes it.
var chunkPattern = regexp.MustCompile(`^(.*"sessionUpdate":"terminal_output_chunk","terminalId":"([^"]+)","data":")([^"]*)("\}\}\})$`)

// mergeChunks merges consecutive output chunks of a terminal into one
// line, whose text is the decoded output.
func mergeChunks(lines []goldenLine) []goldenLine {
	var out []goldenLine
	var data []byte
	for _, l := range lines {
		m := chunkPattern.FindStringSubmatch(l.raw)
		if l.from != "agent" || m == nil {
			out = append(out, l)
			continue
		}
		b, err := base64.StdEncoding.DecodeString(m[3])
		if err != nil {
			out = append(out, l)
			continue
		}
		if n := len(out); n > 0 && out[n-1].text != "" {
			if prev := chunkPattern.FindStringSubmatch(out[n-1].raw); prev != nil && prev[1] == m[1] {
				data = append(data, b...)
				out[n-1] = goldenLine{from: "agent", raw: m[1] + base64.StdEncoding.EncodeToString(data) + m[4], text: string(data)}
				continue
			}
		}
		data = append([]byte(nil), b...)
		out = append(out, goldenLine{from: "agent", raw: l.raw, text: string(b)})
	}
	return out
}

// Patterns of what varies between runs.
var (
	versionPattern = regexp.MustCompile(`("(?:info|agentInfo)":\{"name":"shellagent"(?:,"title":"[^"]*")?,"version":")[^"]*(")`)
	pidPattern     = regexp.MustCompile(`\bpid \d+`)
	membersPattern = regexp.MustCompile(`(?:, pid PID (?:[^,\\"]|\\")*)+(?:, and \d+ more)?`) // after pidPattern; a command line may hold \" (JSON-escaped quotes)
	agePattern     = regexp.MustCompile(`\bage \d+(?:\.\d+)?(?:ns|µs|ms|s|m|h)(?:\d+(?:\.\d+)?(?:ms|s|m))*`)
	waitedPattern  = regexp.MustCompile(`\bwaited \d+(?:\.\d+)?(?:ns|µs|ms|s|m|h)(?:\d+(?:\.\d+)?(?:ms|s|m))*`)
	timePattern    = regexp.MustCompile(`"updatedAt":"[^"]*"`)
	modePattern    = regexp.MustCompile(`"containment":"[^"]*"`)
	scenarioDir    = regexp.MustCompile(`/[^"\s]*/shellagent-scenario-\d+`) // a scenario's temporary directory
)

// render writes the lines as JSONL, {"client":MSG} or {"agent":MSG} with
// "text" for output chunks, with what varies normalised.
func render(lines []goldenLine, cwd string) []byte {
	var buf bytes.Buffer
	for _, l := range lines {
		raw := strings.ReplaceAll(l.raw, cwd, "/cwd")
		raw = versionPattern.ReplaceAllString(raw, "${1}VERSION${2}")
		raw = pidPattern.ReplaceAllString(raw, "pid PID")
		raw = membersPattern.ReplaceAllString(raw, ", PROCESSES") // a shell may not have exec'd yet
		raw = agePattern.ReplaceAllString(raw, "age AGE")
		raw = waitedPattern.ReplaceAllString(raw, "waited WAITED")
		raw = timePattern.ReplaceAllString(raw, `"updatedAt":"TIME"`)
		raw = modePattern.ReplaceAllString(raw, `"containment":"MODE"`)
		raw = scenarioDir.ReplaceAllString(raw, "/SCENARIO_DIR")
		if !json.Valid([]byte(raw)) {
			quoted, _ := json.Marshal(raw) // Safe: a string always encodes.
			raw = string(quoted)
		}
		fmt.Fprintf(&buf, `{%q:%s`, l.from, raw)
		if l.text != "" {
			text, _ := json.Marshal(l.text) // Safe: a string always encodes.
			fmt.Fprintf(&buf, `,"text":%s`, text)
		}
		buf.WriteString("}\n")
	}
	return buf.Bytes()
}

// lineDiff returns the lines that differ, numbered, or "" if a and b are
// equal.
func lineDiff(a, b []byte) string {
	if bytes.Equal(a, b) {
		return ""
	}
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	var sb strings.Builder
	shown := 0
	for i := 0; i < max(len(al), len(bl)) && shown < 10; i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			fmt.Fprintf(&sb, "line %d:\n-%s\n+%s\n", i+1, x, y)
			shown++
		}
	}
	return sb.String()
}
