// Package wiretest drives a JSON-RPC connection line by line over pipes,
// for the tests of package protocol and of its fronts (protocol/v1front):
// a Wire to send lines and read messages, and CheckOneLine, the property
// their fuzz targets check. It knows the connection only as a Conn, so
// that package protocol's own tests can use it without an import cycle.
package wiretest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"shellagent/internal/jsonrpcline"
)

// Conn is a connection served on a Wire's pipes (a *protocol.Conn).
type Conn interface {
	// Done is closed when the connection's input has ended.
	Done() <-chan struct{}
	// Close flushes what is queued and closes the connection.
	Close()
}

// answerWait is how long a test waits for a message the connection is
// bound to write: no promise, only a bound on a failing test.
const answerWait = 10 * time.Second

// Wire is a connection on pipes, driven line by line.
type Wire struct {
	T   testing.TB
	in  *io.PipeWriter
	out *bufio.Reader
}

// Open serves a connection on new pipes (serve makes it, reading in and
// writing out) and returns the Wire to it and the connection. At the end
// of the test the Wire's input ends, and once the connection has seen
// that it is closed, whatever it still writes read and dropped.
func Open[C Conn](t testing.TB, serve func(in io.Reader, out io.Writer) C) (*Wire, C) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	conn := serve(inR, outW)
	t.Cleanup(func() {
		inW.Close()
		<-conn.Done()
		go io.Copy(io.Discard, outR) // Close flushes what is queued
		conn.Close()
		outW.Close()
	})
	return &Wire{T: t, in: inW, out: bufio.NewReader(outR)}, conn
}

// Send writes one line to the connection.
func (w *Wire) Send(line string) {
	w.T.Helper()
	if _, err := io.WriteString(w.in, line+"\n"); err != nil {
		w.T.Fatal(err)
	}
}

// Recv returns the next message the connection writes.
func (w *Wire) Recv() map[string]json.RawMessage {
	w.T.Helper()
	type result struct {
		line []byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := w.out.ReadBytes('\n')
		ch <- result{line, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			w.T.Fatal(r.err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r.line, &m); err != nil {
			w.T.Fatalf("%s: %v", r.line, err)
		}
		return m
	case <-time.After(answerWait):
		w.T.Fatal("no message from the connection")
		return nil
	}
}

// ErrorCode returns the error code of a response, or 0.
func ErrorCode(m map[string]json.RawMessage) int64 {
	var e struct {
		Code int64 `json:"code"`
	}
	if m["error"] == nil || json.Unmarshal(m["error"], &e) != nil {
		return 0
	}
	return e.Code
}

// CheckOneLine sends init and line to a connection that serve makes, then
// a request of its own, and checks that every message written is valid
// JSON-RPC and that a request with a valid id in line is answered exactly
// once, before the connection's own request.
func CheckOneLine[C Conn](t testing.TB, serve func(in io.Reader, out io.Writer) C, init, line string) {
	t.Helper()
	line = strings.ReplaceAll(line, "\n", " ")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	conn := serve(inR, outW)
	msgs := make(chan []byte)
	go func() {
		defer close(msgs)
		br := bufio.NewReader(outR)
		for {
			b, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			msgs <- b
		}
	}()
	defer func() {
		inW.Close()
		<-conn.Done()
		go func() {
			for range msgs {
			}
		}()
		conn.Close()
		outW.Close()
	}()
	send := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() map[string]json.RawMessage {
		select {
		case b := <-msgs:
			var m map[string]json.RawMessage
			if err := json.Unmarshal(b, &m); err != nil || string(m["jsonrpc"]) != `"2.0"` {
				t.Fatalf("wrote %s (%v)", b, err)
			}
			return m
		case <-time.After(answerWait):
			t.Fatal("no answer")
			return nil
		}
	}
	send(init)
	recv()
	send(line)
	send(`{"jsonrpc":"2.0","id":"end","method":"session/list","params":{}}`)
	var answers []map[string]json.RawMessage
	for {
		m := recv()
		if string(m["id"]) == `"end"` {
			break
		}
		answers = append(answers, m)
	}
	id, isRequest := requestID(line)
	if !isRequest {
		return
	}
	n := 0
	for _, m := range answers {
		if sameJSON(m["id"], id) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("request with id %s answered %d times: %v", id, n, answers)
	}
}

// requestID returns the id of a line that is a JSON-RPC request with an id
// the connection can carry back.
func requestID(line string) (json.RawMessage, bool) {
	env, refusal := jsonrpcline.Check([]byte(line))
	return env.ID, refusal == nil && env.Kind == jsonrpcline.Request
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
