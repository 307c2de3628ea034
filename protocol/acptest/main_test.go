package acptest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// fakeAgentEnv makes the test binary act as a tiny agent (see fakeAgent).
const fakeAgentEnv = "ACPTEST_FAKE_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(fakeAgentEnv) == "1" {
		os.Exit(fakeAgent(os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// fakeAgent answers initialize and session/new, logs every method to
// stderr, and exits with the status in $ACPTEST_FAKE_EXIT at stdin EOF.
func fakeAgent(in io.Reader, out, errOut io.Writer) int {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			fmt.Fprintln(out, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`)
			continue
		}
		fmt.Fprintf(errOut, "got %s\n", req.Method)
		switch req.Method {
		case "initialize":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":2,"info":{"name":"fake","version":"0"}}}`+"\n", req.ID)
		case "session/new":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"state_update","state":"idle","background":[]}}}`+"\n")
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"s1"}}`+"\n", req.ID)
		default:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`+"\n", req.ID)
		}
	}
	fmt.Fprint(errOut, "bye (no newline)")
	if os.Getenv("ACPTEST_FAKE_EXIT") == "3" {
		return 3
	}
	return 0
}

// recorder is a reporter that records failures instead of failing.
type recorder struct {
	parent testing.TB
	mu     sync.Mutex
	errors []string
	fatals []string
	logs   []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// Fatalf records the failure and ends the calling goroutine, as t.Fatalf does.
func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func (r *recorder) Cleanup(f func()) { r.parent.Cleanup(f) }

// Errors returns the recorded errors.
func (r *recorder) Errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errors...)
}

// Fatals returns the recorded fatal failures.
func (r *recorder) Fatals() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.fatals...)
}

// Logs returns the recorded log lines.
func (r *recorder) Logs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.logs...)
}

// harness is a Client connected through pipes to a scripted agent.
type harness struct {
	t      *testing.T
	rec    *recorder
	c      *Client
	agentW *io.PipeWriter // the agent's stdout
	sent   chan string    // lines the client wrote to the agent's stdin
	drain  sync.WaitGroup
	closed bool
}

// newHarness returns a harness whose Client reports into a recorder.
func newHarness(t *testing.T, opts ...Option) *harness {
	t.Helper()
	outR, outW := io.Pipe()
	inR, inW := io.Pipe()
	h := &harness{t: t, rec: &recorder{parent: t}, agentW: outW, sent: make(chan string, 1<<16)}
	h.drain.Go(func() {
		defer close(h.sent)
		sc := bufio.NewScanner(inR)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			h.sent <- sc.Text()
		}
		inR.CloseWithError(io.ErrClosedPipe) // unblock any writer
	})
	h.c = newClient(h.rec, outR, inW, opts...)
	t.Cleanup(h.end)
	return h
}

// agent writes lines as the agent and waits until the client has read them all.
func (h *harness) agent(lines ...string) {
	h.t.Helper()
	want := len(h.c.Transcript()) + len(lines)
	for _, l := range lines {
		if _, err := io.WriteString(h.agentW, l+"\n"); err != nil {
			h.t.Fatalf("writing agent line: %v", err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(h.c.Transcript()) < want {
		if time.Now().After(deadline) {
			h.t.Fatalf("client did not read %d lines", want)
		}
		time.Sleep(time.Millisecond)
	}
}

// next returns the next line the client wrote to the agent.
func (h *harness) next() string {
	h.t.Helper()
	select {
	case l := <-h.sent:
		return l
	case <-time.After(5 * time.Second):
		h.t.Fatalf("the client wrote nothing")
		return ""
	}
}

// end closes the agent's stdout, closes the client, and waits for the
// stdin drainer. It is idempotent.
func (h *harness) end() {
	if h.closed {
		return
	}
	h.closed = true
	h.agentW.Close()
	h.c.Close()
	h.drain.Wait()
}

// errorsContaining returns the recorded errors that contain all of subs.
func (h *harness) errorsContaining(subs ...string) []string {
	var out []string
	for _, e := range h.rec.Errors() {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(e, s)
		}
		if ok {
			out = append(out, e)
		}
	}
	return out
}

// update renders a session/update notification.
func update(session, upd string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":%s}}`, session, upd)
}
