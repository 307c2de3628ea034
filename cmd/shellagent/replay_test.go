package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
	"shellagent/replay"
)

// goldenTranscripts returns the golden transcripts, v2 and v1.
func goldenTranscripts(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"*.jsonl", "v1/*.jsonl"} {
		m, _ := filepath.Glob(filepath.Join(transcriptDir, pattern)) // Safe: the patterns are valid.
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatal("no golden transcripts")
	}
	return files
}

// TestReplayStrictClient plays each golden transcript with shellagent
// replay to the strict client, which sends the transcript's client lines
// (under ids of its own), each once the agent lines before it have
// arrived, validates every line it gets against the schema, and checks
// the RFD's ordering rules at the end: zero departures, exit status 0.
func TestReplayStrictClient(t *testing.T) {
	t.Parallel()
	for _, file := range goldenTranscripts(t) {
		name, _ := filepath.Rel(transcriptDir, file)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := startReplay(t, file)
			r.play(nil)
			r.c.Check()
			r.checkDir()
			if code, stderr := r.end(); code != 0 || stderr != "" {
				t.Errorf("exit status %d, stderr:\n%s", code, stderr)
			}
		})
	}
}

// TestReplayDepartures: a client that departs from the transcript on
// purpose gets a report on stderr that names the line and what differs,
// and exit status 1; a request the transcript does not have is answered
// with an error, and the replay goes on.
func TestReplayDepartures(t *testing.T) {
	t.Parallel()
	const file = transcriptDir + "/foreground.jsonl" // line 5 is the prompt, the 3rd client line
	tests := []struct {
		name string
		edit func(n int, msg []byte) [][]byte // nil: stop there
		want []string
	}{
		{
			name: "another method",
			edit: func(n int, msg []byte) [][]byte {
				if n == 2 {
					return [][]byte{[]byte(`{"jsonrpc":"2.0","id":77,"method":"session/list","params":{}}`), nil}
				}
				return [][]byte{msg}
			},
			want: []string{
				"foreground.jsonl:5: want a session/prompt request, got a session/list request",
				"foreground.jsonl:5: never sent: a session/prompt request",
			},
		},
		{
			name: "different params",
			edit: func(n int, msg []byte) [][]byte {
				return [][]byte{bytes.Replace(msg, []byte("echo hello"), []byte("echo bye"), 1)}
			},
			want: []string{`foreground.jsonl:5: a session/prompt request differs: params.prompt[0].text: want "echo hello", got "echo bye"`},
		},
		{
			name: "an extra request",
			edit: func(n int, msg []byte) [][]byte {
				if n == 2 {
					return [][]byte{[]byte(`{"jsonrpc":"2.0","id":77,"method":"session/list","params":{}}`), msg}
				}
				return [][]byte{msg}
			},
			want: []string{"foreground.jsonl:5: want a session/prompt request, got a session/list request"},
		},
		{
			name: "stops early",
			edit: func(n int, msg []byte) [][]byte {
				if n == 2 {
					return [][]byte{nil}
				}
				return [][]byte{msg}
			},
			want: []string{"foreground.jsonl:5: never sent: a session/prompt request"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := startReplay(t, file)
			r.play(tt.edit)
			if strings.Contains(tt.name, "extra") || strings.Contains(tt.name, "another method") {
				m := r.c.Wait(77 + idOffset)
				if m.Error == nil || m.Error.Code != -32603 || !strings.Contains(m.Error.Message, "line 5 of the transcript is a session/prompt request") {
					t.Errorf("the request the transcript does not have was answered %s", m)
				}
			}
			code, stderr := r.end()
			want := strings.Join(tt.want, "\n") + fmt.Sprintf("\nshellagent replay: %d departure", len(tt.want))
			if code != 1 || !strings.HasPrefix(stderr, want) {
				t.Errorf("exit status %d, stderr:\n%s\nwant 1 and\n%s", code, stderr, want)
			}
		})
	}
}

// TestReplayBadInput: the replay refuses bad lines as the agent does (a
// line over 16 MiB, a line that is not JSON), reports them, and goes on.
func TestReplayBadInput(t *testing.T) {
	t.Parallel()
	r := startReplay(t, transcriptDir+"/foreground.jsonl")
	long := bytes.Repeat([]byte("x"), 16<<20+1) // not JSON either: refused for its length first
	r.play(func(n int, msg []byte) [][]byte {
		if n == 2 {
			return [][]byte{long, []byte("garbage"), msg}
		}
		return [][]byte{msg}
	})
	for _, want := range []string{
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"message longer than 16777216 bytes"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: not valid JSON"}}`,
	} {
		r.c.WaitFor(want, func(m *acptest.Msg) bool { return string(m.Raw) == want })
	}
	code, stderr := r.end()
	want := `foreground.jsonl:5: a line longer than the agent accepts
foreground.jsonl:5: want a session/prompt request, got a line that is not JSON: "garbage"
shellagent replay: 2 departures from foreground.jsonl
`
	if code != 1 || stderr != want {
		t.Errorf("exit status %d, stderr:\n%s\nwant 1 and\n%s", code, stderr, want)
	}
}

// shellagent replay refuses a FILE that is one endless line, in bounded
// memory, and its client's endless line likewise. Issue 22: "shellagent
// replay /dev/zero" reached 1 GB in 6 s (and one 100 MB line peaked at
// 753 MB); before, this test's first run was killed at its deadline.
func TestReplayMemoryIsBounded(t *testing.T) {
	t.Parallel()
	const limit = 256 << 10 // KiB of peak RSS
	run := func(stdin string, args ...string) (code int, stderr string, peak int64) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), testloop.Wait)
		defer cancel()
		cmd := exec.CommandContext(ctx, plainBinary, args...) // the memory figure is the plain build's
		in, err := os.Open(stdin)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		var errb bytes.Buffer
		cmd.Stdin, cmd.Stderr = in, &errb
		peak, err = runForPeak(cmd)
		if ctx.Err() != nil {
			return -1, errb.String(), peak
		}
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), errb.String(), peak
	}
	code, stderr, peak := run(os.DevNull, "replay", "/dev/zero")
	if want := "shellagent: replay: /dev/zero:1: a line longer than 33554432 bytes, twice what the agent accepts\n"; code != 2 || !strings.HasPrefix(stderr, want) {
		t.Errorf("replay /dev/zero: exit status %d, stderr %q, want 2 and %q…", code, stderr, want)
	}
	t.Logf("replay /dev/zero: peak RSS %d KiB", peak)
	if peak == 0 || peak > limit {
		t.Errorf("replay /dev/zero: peak RSS %d MiB, want at most %d", peak>>10, limit>>10)
	}

	// The client's side: a line that never ends, for a second (gigabytes).
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, plainBinary, "replay", filepath.Join(transcriptDir, "foreground.jsonl"))
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer zero.Close()
	cmd.Stdin = zero
	peak, _ = runForPeak(cmd) // killed at the deadline
	if peak > limit {
		t.Errorf("replay < /dev/zero: peak RSS %d MiB, want at most %d", peak>>10, limit>>10)
	}
}

// runForPeak runs cmd and returns its peak RSS in KiB, its VmHWM as
// /proc shows it until it exits. Not the Maxrss of its rusage: a child
// that the runtime starts with CLONE_VM takes the parent's high-water mark
// at exec, and a test binary running its tests in parallel (with -race
// most of all) has a far bigger one than any child.
func runForPeak(cmd *exec.Cmd) (peak int64, err error) {
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, rerr := os.ReadFile(status); rerr == nil {
			for line := range strings.Lines(string(b)) {
				if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
					var kib int64
					fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kib)
					peak = max(peak, kib)
				}
			}
		}
		select {
		case err := <-done:
			return peak, err
		case <-tick.C:
		}
	}
}

// replayed is shellagent replay FILE on pipes, with the strict client.
type replayed struct {
	t      *testing.T
	dir    string // the client's directory, which it sends for /cwd
	tr     *replay.Transcript
	c      *acptest.Client
	cmd    *exec.Cmd
	stderr *syncBuffer
}

// startReplay starts shellagent replay on file, from its directory (so
// that reports name the file's base name); the client speaks v1 for a
// transcript in a v1 directory.
func startReplay(t *testing.T, file string) *replayed {
	t.Helper()
	tr, err := replay.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "replay", filepath.Base(file))
	cmd.Dir = filepath.Dir(file)
	cmd.Env = append(cmd.Environ(), noRaceExitDelay)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var opts []acptest.Option
	if filepath.Base(filepath.Dir(file)) == "v1" {
		opts = append(opts, acptest.WithProtocolV1())
	}
	if invalidTranscript(file) {
		opts = append(opts, acptest.WithTolerated(malformedLine))
	}
	r := &replayed{t: t, dir: t.TempDir(), tr: tr, c: acptest.New(t, stdout, stdin, opts...), cmd: cmd, stderr: stderr}
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			r.end()
		}
	})
	return r
}

// idOffset is added to the integer ids of the transcript's requests, so
// that the replay has to answer under the client's ids.
const idOffset = 1000000

// play sends the transcript's client lines, the n-th (from 0) as edit
// returns it (a nil line: stop sending; a nil edit sends every line as
// it is), each once the agent lines before it have arrived, with the
// client's directory for /cwd; then it waits for the rest of the agent
// lines.
func (r *replayed) play(edit func(n int, msg []byte) [][]byte) {
	r.t.Helper()
	agent, n := 0, 0
	for _, l := range r.tr.Lines {
		if l.From == replay.Agent {
			agent++
			continue
		}
		r.waitAgentLines(agent)
		lines := [][]byte{l.Msg}
		if edit != nil {
			lines = edit(n, l.Msg)
		}
		n++
		for _, line := range lines {
			if line == nil {
				return
			}
			r.c.SendRaw(withOffsetID(bytes.ReplaceAll(line, []byte(`"/cwd`), []byte(`"`+r.dir))))
		}
	}
	r.waitAgentLines(agent)
}

// checkDir checks that the agent lines name the client's directory where
// the transcript has /cwd.
func (r *replayed) checkDir() {
	r.t.Helper()
	want := 0
	for _, l := range r.tr.Lines {
		if l.From == replay.Agent {
			want += bytes.Count(l.Msg, []byte("/cwd"))
		}
	}
	got := 0
	for _, m := range r.c.Transcript() {
		if bytes.Contains(m.Raw, []byte("/cwd")) {
			r.t.Errorf("/cwd sent as it is: %s", m.Raw)
		}
		got += bytes.Count(m.Raw, []byte(r.dir))
	}
	if got != want {
		r.t.Errorf("the client's directory named %d times, want %d (as /cwd in the transcript)", got, want)
	}
}

// waitAgentLines waits until n lines have arrived from the replay.
func (r *replayed) waitAgentLines(n int) {
	r.t.Helper()
	if n > 0 {
		r.c.WaitFor(fmt.Sprintf("agent line %d", n), func(m *acptest.Msg) bool { return m.Seq >= n-1 })
	}
}

// withOffsetID returns a request with its integer id moved by idOffset;
// other lines as they are.
func withOffsetID(line []byte) []byte {
	var msg map[string]json.RawMessage
	if json.Unmarshal(line, &msg) != nil || msg["method"] == nil {
		return line
	}
	id, err := strconv.ParseInt(string(msg["id"]), 10, 64)
	if err != nil {
		return line
	}
	msg["id"] = json.RawMessage(strconv.FormatInt(id+idOffset, 10))
	b, err := json.Marshal(msg)
	if err != nil {
		return line
	}
	return b
}

// end closes the replay's stdin and returns its exit status and stderr.
func (r *replayed) end() (int, string) {
	r.t.Helper()
	r.c.Close()
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(acptest.StopTimeout):
		r.t.Errorf("shellagent replay did not exit within %v of its stdin closing", acptest.StopTimeout)
		r.cmd.Process.Kill() // Best effort: Wait tells.
		err = <-done
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, r.stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), r.stderr.String()
	}
	r.t.Fatalf("shellagent replay: %v", err)
	return -1, ""
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestReplayCapture is the client developer's round trip: an exchange
// captured with shellagent client --trace from the real agent, replayed
// by shellagent replay to the same client in another directory, prints
// the same, with zero departures. The capture is raw: the real directory,
// the agent's own chunks, the client's ids.
func TestReplayCapture(t *testing.T) {
	t.Parallel()
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	input := "echo captured\n/bg sleep 30\n"
	first, second := t.TempDir(), t.TempDir()
	live, stderr, code := runBinary(t, input, nil, "client", "--cwd", first, "--trace", trace, "--", binary, "--shell", "/bin/sh")
	if code != 0 || !strings.Contains(live, "captured") {
		t.Fatalf("capture: exit %d, stdout:\n%s\nstderr:\n%s", code, live, stderr)
	}
	replayed, stderr, code := runBinary(t, input, nil, "client", "--cwd", second, "--", binary, "replay", trace)
	if code != 0 || stderr != "" {
		t.Errorf("replay: exit %d, stderr:\n%s", code, stderr)
	}
	if want := strings.ReplaceAll(live, first, second); replayed != want {
		t.Errorf("the replay printed\n%s\nwant\n%s", replayed, want)
	}
}
