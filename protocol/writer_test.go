package protocol

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"shellagent/outputbuf"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gate is an io.Writer that blocks while closed, like a client that stops
// reading.
type gate struct {
	mu   sync.Mutex
	open *sync.Cond
	shut bool
	buf  bytes.Buffer
}

func newGate() *gate {
	g := &gate{}
	g.open = sync.NewCond(&g.mu)
	return g
}

func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.shut {
		g.open.Wait()
	}
	return g.buf.Write(p)
}

func (g *gate) size() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Len()
}

func (g *gate) set(shut bool) {
	g.mu.Lock()
	g.shut = shut
	g.mu.Unlock()
	g.open.Broadcast()
}

// event is one decoded line: a terminal's bytes (chunk or snapshot) or
// another update.
type event struct {
	kind     string // update kind, or "response"
	terminal string
	data     []byte
	snapshot bool
	dropped  int64
	exit     bool
}

func decodeLines(t *testing.T, out []byte) []event {
	t.Helper()
	var evs []event
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Update struct {
					Kind       string          `json:"sessionUpdate"`
					TerminalID string          `json:"terminalId"`
					Data       string          `json:"data"`
					ExitStatus json.RawMessage `json:"exitStatus"`
					Output     *struct {
						Data string `json:"data"`
						Meta struct {
							Shellagent struct {
								DroppedBytes int64 `json:"droppedBytes"`
							} `json:"shellagent"`
						} `json:"_meta"`
					} `json:"output"`
				} `json:"update"`
			} `json:"params"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Bytes(), err)
		}
		u := m.Params.Update
		ev := event{kind: u.Kind, terminal: u.TerminalID, exit: len(u.ExitStatus) > 0}
		if m.Method == "" {
			ev.kind = "response"
		}
		var err error
		switch {
		case u.Kind == KindTerminalOutput:
			ev.data, err = base64.StdEncoding.DecodeString(u.Data)
		case u.Output != nil:
			ev.snapshot, ev.dropped = true, u.Output.Meta.Shellagent.DroppedBytes
			ev.data, err = base64.StdEncoding.DecodeString(u.Output.Data)
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// announce queues the first update of term_1, which starts its stream.
func announce(w *writer, ring *outputbuf.Ring) {
	w.updateTerminal("s", &TerminalUpdate{SessionUpdate: KindTerminal, TerminalID: "term_1", Command: "x"}, ring, StreamOutput)
}

// exit queues the exit update of a terminal, which ends its stream.
func exit(w *writer, id string, ring *outputbuf.Ring) {
	w.updateTerminal("s", &TerminalUpdate{SessionUpdate: KindTerminal, TerminalID: id, ExitStatus: &ExitStatus{}}, ring, StreamOutput)
}

func TestWriterSendsOutputBetweenAnnounceAndExit(t *testing.T) {
	g := newGate()
	w := newWriter(g, discardLog())
	ring := outputbuf.New(1 << 20)
	ring.Write([]byte("before announce|"))
	announce(w, ring)
	for i := range 100 {
		ring.Write([]byte(strings.Repeat(string(rune('a'+i%26)), 1000)))
	}
	ring.Write([]byte("|last"))
	exit(w, "term_1", ring)
	ring.Write([]byte("after exit")) // a writer that lost the race: must not be sent
	w.update("s", &StateUpdate{SessionUpdate: KindState, State: StateIdle})
	w.close()

	evs := decodeLines(t, g.buf.Bytes())
	var got []byte
	phase := 0 // 0: before announce, 1: streaming, 2: after exit
	for _, ev := range evs {
		switch {
		case ev.kind == KindTerminal && !ev.exit:
			phase = 1
		case ev.kind == KindTerminal && ev.exit:
			phase = 2
		case ev.kind == KindTerminalOutput:
			if phase != 1 {
				t.Fatalf("chunk in phase %d", phase)
			}
			got = append(got, ev.data...)
		}
	}
	// Everything written before the exit update was queued goes out before
	// it; a late write may go out too, but never after it.
	all, _ := ring.Snapshot()
	before := string(all[:len(all)-len("after exit")])
	if string(got) != before && string(got) != string(all) {
		t.Errorf("streamed %d bytes, want %d (%q…)", len(got), len(before), got[:min(len(got), 40)])
	}
	if evs[len(evs)-1].kind != KindState {
		t.Errorf("last message %+v, want the state update", evs[len(evs)-1])
	}
}

func TestWriterSnapshotsWhenTheClientFellBehind(t *testing.T) {
	g := newGate()
	w := newWriter(g, discardLog())
	ring := outputbuf.New(1000)
	announce(w, ring)
	w.send([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	g.set(true) // the client stops reading
	ring.Write([]byte("x"))
	for i := range 10 {
		ring.Write(bytes.Repeat([]byte{byte('0' + i)}, 1000))
	}
	g.set(false)
	ring.Write([]byte("tail"))
	exit(w, "term_1", ring)
	w.close()

	var got []byte
	snapshots := 0
	for _, ev := range decodeLines(t, g.buf.Bytes()) {
		switch {
		case ev.snapshot:
			snapshots++
			if ev.dropped <= 0 {
				t.Errorf("snapshot without droppedBytes")
			}
			got = append([]byte(nil), ev.data...)
		case ev.kind == KindTerminalOutput:
			got = append(got, ev.data...)
		}
	}
	if snapshots == 0 {
		t.Fatal("no replacement snapshot after the ring was overwritten")
	}
	all, _ := ring.Snapshot()
	if !bytes.HasSuffix(got, all) {
		t.Errorf("client holds %q, want it to end with the ring %q", got, all)
	}
}

func TestWriterResumeSnapshot(t *testing.T) {
	g := newGate()
	w := newWriter(g, discardLog())
	ring := outputbuf.New(1 << 10)
	ring.Write([]byte("hello "))
	w.updateTerminal("s", &TerminalUpdate{SessionUpdate: KindTerminal, TerminalID: "term_1"}, ring, ReplaceOutput)
	ring.Write([]byte("world"))
	exit(w, "term_1", ring)
	w.close()
	var got []byte
	for _, ev := range decodeLines(t, g.buf.Bytes()) {
		if ev.snapshot {
			got = append([]byte(nil), ev.data...)
		} else if ev.kind == KindTerminalOutput {
			got = append(got, ev.data...)
		}
	}
	if string(got) != "hello world" {
		t.Errorf("client holds %q", got)
	}
}

func TestWriterTakesTerminalsInTurn(t *testing.T) {
	g := newGate()
	w := newWriter(g, discardLog())
	a, b := outputbuf.New(4<<20), outputbuf.New(4<<20)
	announce(w, a)
	w.updateTerminal("s", &TerminalUpdate{SessionUpdate: KindTerminal, TerminalID: "term_2"}, b, StreamOutput)
	g.set(true) // the writer blocks on its next write
	w.send([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	a.Write(bytes.Repeat([]byte("a"), 1<<20))
	b.Write(bytes.Repeat([]byte("b"), 1<<20))
	g.set(false)
	// Let the writer drain both before the exit updates, which flush a
	// terminal's output in one go.
	for g.size() < 2*(1<<20)*4/3 {
		time.Sleep(time.Millisecond)
	}
	exit(w, "term_1", a)
	exit(w, "term_2", b)
	w.close()
	// Chunks of the two terminals alternate instead of one draining first.
	var order []string
	for _, ev := range decodeLines(t, g.buf.Bytes()) {
		if ev.kind == KindTerminalOutput && (len(order) == 0 || order[len(order)-1] != ev.terminal) {
			order = append(order, ev.terminal)
		}
	}
	if len(order) < 8 {
		t.Errorf("terminals were sent in runs %v; want them interleaved", order)
	}
}

func TestWriterCloseWhileATerminalStillWrites(t *testing.T) {
	g := newGate()
	w := newWriter(g, discardLog())
	ring := outputbuf.New(64 << 10)
	announce(w, ring)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				ring.Write([]byte("still writing\n"))
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	closed := make(chan struct{})
	go func() { w.close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Error("Close did not return while a terminal kept writing")
	}
	close(stop)
	<-done
	<-closed
	if g.size() == 0 {
		t.Error("nothing was written")
	}
}
