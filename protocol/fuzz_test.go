package protocol

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/internal/jsonrpcline"
)

// Fuzz targets, seeded from testdata/fuzz/; .ci/run runs each briefly.

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
