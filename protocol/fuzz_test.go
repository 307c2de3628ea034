package protocol

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
)

// Fuzz targets, seeded from testdata/fuzz/; .ci/run runs each briefly.

// FuzzLineReader checks the line reader against splitting the whole input
// at '\n', with read buffers small enough to split lines into fragments.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\nbb\r\n\nccc"), uint8(2), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, max, size uint8) {
		r := newLineReaderSize(bytes.NewReader(data), int(max), 16+int(size))
		var got [][]byte
		for {
			line, err := r.next()
			if errors.Is(err, io.EOF) {
				break
			}
			switch {
			case errors.Is(err, errTooLong):
				line = []byte("!")
			case err != nil:
				t.Fatal(err)
			default:
				line = bytes.Clone(line)
			}
			got = append(got, line)
		}
		var want [][]byte
		segs := bytes.Split(data, []byte("\n"))
		if len(segs[len(segs)-1]) == 0 {
			segs = segs[:len(segs)-1] // after the last newline
		}
		for _, s := range segs {
			s = bytes.TrimRight(s, "\r")
			if len(s) > int(max) {
				s = []byte("!")
			}
			want = append(want, s)
		}
		if len(got) != len(want) {
			t.Fatalf("%d lines %q, want %d %q", len(got), got, len(want), want)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) && !(len(got[i]) == 0 && len(want[i]) == 0) {
				t.Fatalf("line %d = %q, want %q", i, got[i], want[i])
			}
		}
	})
}

// immediateAgent answers every method at once.
type immediateAgent struct{ stubAgent }

func (immediateAgent) Prompt(_ context.Context, _ Client, _ *acp.PromptRequest, reply Reply) {
	reply(&acp.PromptResponse{MessageID: "m"}, nil)
}

// FuzzRequest sends one line to a connection, then a request of its own:
// whatever the line, the connection answers only with valid JSON-RPC, goes
// on reading, and answers a request with a valid id exactly once, with
// that id.
func FuzzRequest(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"ls"}]}}`)
	f.Fuzz(func(t *testing.T, line string) {
		checkOneLine(t, immediateAgent{}, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":2}}`, line)
	})
}

// checkOneLine sends init and line to a connection serving agent, then a
// request of its own, and checks that every message written is valid
// JSON-RPC and that a request with a valid id in line is answered exactly
// once, before the connection's own request.
func checkOneLine(t *testing.T, agent Agent, init, line string) {
	line = strings.ReplaceAll(line, "\n", " ")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	conn := NewConn(inR, outW, agent, Options{Log: discardLog()})
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
		case <-time.After(10 * time.Second):
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
	var env envelope
	if checkMessage([]byte(line)) != nil || json.Unmarshal([]byte(line), &env) != nil {
		return nil, false
	}
	return env.ID, env.ID != nil && env.Method != nil && validID(env.ID) != nil
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
