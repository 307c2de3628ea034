package lineclient

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"shellagent/internal/testloop"
)

// peer is the agent's end of a conn under test: it reads what the client
// sends and writes what the agent says.
type peer struct {
	t    *testing.T
	c    *conn
	in   *bufio.Scanner // the client's lines
	out  io.Writer      // to the client
	stop func()
}

// newPeer connects a conn to a peer over two pipes, with trace as the
// conn's trace.
func newPeer(t *testing.T, trace io.Writer) *peer {
	t.Helper()
	toClientR, toClientW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	toAgentR, toAgentW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{t: t, c: newConn(toClientR, toAgentW, trace), in: bufio.NewScanner(toAgentR), out: toClientW}
	p.in.Buffer(nil, maxLine)
	p.stop = func() {
		p.c.close()
		_ = toClientW.Close() // Best effort: the test's end of the pipes.
		_ = toAgentR.Close()  // Best effort: likewise.
	}
	t.Cleanup(p.stop)
	return p
}

// read returns the next message the client sent.
func (p *peer) read() *message {
	p.t.Helper()
	if !p.in.Scan() {
		p.t.Fatalf("the client's output ended: %v", p.in.Err())
	}
	var m message
	if err := json.Unmarshal(p.in.Bytes(), &m); err != nil {
		p.t.Fatalf("the client sent %q: %v", p.in.Bytes(), err)
	}
	return &m
}

// say writes lines to the client.
func (p *peer) say(lines ...string) {
	p.t.Helper()
	if _, err := io.WriteString(p.out, strings.Join(lines, "\n")+"\n"); err != nil {
		p.t.Fatal(err)
	}
}

// next returns the next line the conn read, within 20 s.
func (p *peer) next() inbound {
	p.t.Helper()
	select {
	case in, ok := <-p.c.lines:
		if !ok {
			p.t.Fatal("the conn's lines ended")
		}
		return in
	case <-time.After(testloop.Wait):
		p.t.Fatalf("no line from the conn within %v", testloop.Wait)
	}
	return inbound{}
}

// Requests are numbered 1, 2, … and each answer, in whatever order it
// comes, runs its own request's callback once; an answer to no pending
// request has none. Notifications have no id; answers echo the agent's id.
func TestConnCalls(t *testing.T) {
	p := newPeer(t, nil)
	got := map[string]string{}
	for _, method := range []string{"a", "b", "c"} {
		p.c.call(method, map[string]string{"m": method}, func(m *message) { got[method] = string(m.Result) })
	}
	p.c.notify("n", map[string]int{"x": 1})
	p.c.reply(json.RawMessage(`"p1"`), map[string]bool{"ok": true})
	p.c.replyError(json.RawMessage(`7`), -32601, "method not found: x")
	var ids []string
	for range 3 {
		m := p.read()
		ids = append(ids, string(m.ID))
		if m.JSONRPC != "2.0" || string(m.Params) != fmt.Sprintf(`{"m":%q}`, m.Method) {
			t.Errorf("request %+v", m)
		}
	}
	if !slices.Equal(ids, []string{"1", "2", "3"}) {
		t.Errorf("ids %v, want 1 2 3", ids)
	}
	if m := p.read(); m.Method != "n" || len(m.ID) != 0 {
		t.Errorf("notification %+v", m)
	}
	if m := p.read(); string(m.ID) != `"p1"` || string(m.Result) != `{"ok":true}` {
		t.Errorf("reply %+v", m)
	}
	if m := p.read(); string(m.ID) != "7" || m.Error == nil || m.Error.Code != -32601 {
		t.Errorf("error reply %+v", m)
	}
	p.say(`{"jsonrpc":"2.0","id":3,"result":"c"}`, `{"jsonrpc":"2.0","id":1,"result":"a"}`,
		`{"jsonrpc":"2.0","id":1,"result":"again"}`, `{"jsonrpc":"2.0","id":2,"result":"b"}`)
	var unmatched int
	for range 4 {
		m, then, err := p.c.receive(p.next().line)
		if err != nil {
			t.Fatal(err)
		}
		if then == nil {
			unmatched++
			continue
		}
		then(m)
	}
	if want := map[string]string{"a": `"a"`, "b": `"b"`, "c": `"c"`}; fmt.Sprint(got) != fmt.Sprint(want) || unmatched != 1 {
		t.Errorf("callbacks got %v and %d unmatched, want %v and 1", got, unmatched, want)
	}
	if _, _, err := p.c.receive([]byte("not json")); err == nil {
		t.Error("receive took a line that is not JSON")
	}
}

// Messages sent from many goroutines at once reach the agent whole, each
// on a line of its own, with distinct ids.
func TestConnConcurrentSends(t *testing.T) {
	p := newPeer(t, io.Discard)
	const senders, each = 8, 200
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for i := range each {
				if i%2 == 0 {
					p.c.call("m", map[string]int{"g": g, "i": i}, func(*message) {})
				} else {
					p.c.notify("n", map[string]string{"pad": strings.Repeat("x", 1000)})
				}
			}
		})
	}
	ids := map[string]bool{}
	for range senders * each {
		m := p.read()
		if m.Method == "m" {
			if ids[string(m.ID)] {
				t.Fatalf("id %s sent twice", m.ID)
			}
			ids[string(m.ID)] = true
		}
	}
	wg.Wait()
	if len(ids) != senders*each/2 {
		t.Errorf("%d requests, want %d", len(ids), senders*each/2)
	}
	if err := p.c.err(); err != nil {
		t.Error(err)
	}
}

// An agent that does not read never blocks a send: the messages wait
// until more than 16 MiB do, then the conn fails, saying so. close ends
// the write that the agent never takes. (A send that blocked would block
// for good: how long the sends take is the machine's load, not the rule.)
func TestConnAgentNotReading(t *testing.T) {
	p := newPeer(t, nil)
	chunk := strings.Repeat("x", 64<<10)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for range maxUnsent/len(chunk) + 4 {
			p.c.notify("n", chunk)
		}
	}()
	select {
	case <-sent:
	case <-time.After(testloop.Wait):
		t.Fatalf("the sends have not returned after %v", testloop.Wait)
	}
	select {
	case <-p.c.failed():
	case <-time.After(testloop.Wait):
		t.Fatal("the conn did not fail")
	}
	if err := p.c.err(); err == nil || !strings.Contains(err.Error(), "it is not reading") {
		t.Errorf("err() = %v", err)
	}
	closed := make(chan struct{})
	go func() {
		p.stop()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(testloop.Wait):
		t.Fatal("close did not end the blocked write")
	}
}

// hangUp with eof writes every message sent before it, then closes the
// agent's stdin; what is sent after it is not written.
func TestConnHangUp(t *testing.T) {
	p := newPeer(t, nil)
	for i := range 100 {
		p.c.notify("n", i)
	}
	p.c.hangUp(true)
	p.c.notify("late", 0)
	for i := range 100 {
		if m := p.read(); string(m.Params) != fmt.Sprint(i) {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
	if p.in.Scan() {
		t.Errorf("after the hang-up the client sent %s", p.in.Bytes())
	}
}

// hangUp without eof leaves the agent's stdin open until close.
func TestConnHangUpOpen(t *testing.T) {
	p := newPeer(t, nil)
	p.c.notify("n", 0)
	p.read()
	p.c.hangUp(false)
	p.c.notify("late", 0)
	select {
	case <-p.c.written:
	case <-time.After(20 * time.Second):
		t.Fatal("the writer did not return")
	}
	eof := make(chan bool)
	go func() { eof <- !p.in.Scan() }()
	select {
	case <-eof:
		t.Fatal("the agent's stdin was closed before close")
	case <-time.After(100 * time.Millisecond):
	}
	p.c.close()
	if !<-eof {
		t.Errorf("after close the client sent %s", p.in.Bytes())
	}
}

// The trace holds both ways, in the order sent and received.
func TestConnTrace(t *testing.T) {
	var trace strings.Builder
	p := newPeer(t, &trace)
	p.c.call("initialize", map[string]int{}, nil)
	p.read()
	p.say(`{"jsonrpc":"2.0","id":1,"result":{}}`, "not json")
	for range 2 {
		_, _, _ = p.c.receive(p.next().line) // Safe: the trace is what is tested.
	}
	want := `{"client":{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}}` + "\n" +
		`{"agent":{"jsonrpc":"2.0","id":1,"result":{}}}` + "\n" + `{"agent":"not json"}` + "\n"
	if trace.String() != want {
		t.Errorf("trace:\n%s\nwant:\n%s", trace.String(), want)
	}
}

// A line over the cap is refused as soon as the cap is passed, and the
// line after it is read.
func TestConnLineOverCap(t *testing.T) {
	p := newPeer(t, nil)
	go func() {
		_, _ = io.WriteString(p.out, strings.Repeat("x", 20<<20)+"\n"+`{"jsonrpc":"2.0","method":"after"}`+"\n") // Best effort: checked by what the conn reads.
	}()
	if in := p.next(); !errors.Is(in.err, errLineTooLong) {
		t.Errorf("first %+v, want errLineTooLong", in)
	}
	if in := p.next(); string(in.line) != `{"jsonrpc":"2.0","method":"after"}` {
		t.Errorf("then %q", in.line)
	}
}
