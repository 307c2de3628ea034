package protocol

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"

	"shellagent/acp"
	"shellagent/internal/jsonrpcline"
)

// objectStream is the jsonrpc2.ObjectStream of a connection: it reads one
// message per line and writes through the connection's Writer. A line that
// is not a valid JSON-RPC message is answered here, and reading goes on.
// While too many replies wait for a client that does not read, it reads
// nothing (see replyBacklog): the kernel then holds the client's
// writes, and every request is answered once the client reads.
type objectStream struct {
	msgs  *jsonrpcline.Reader
	w     *writer
	ready <-chan struct{} // closed when the connection is set up
	log   *slog.Logger
}

// ReadObject decodes the next valid message into v. Check has decoded the
// envelope already; the line is decoded again only to carry an id that
// jsonrpc2 cannot hold as a number, and then by jsonrpc2 into v.
func (s *objectStream) ReadObject(v any) error {
	<-s.ready
	for {
		s.w.replies.wait()
		m, err := s.msgs.Next()
		if err != nil {
			return err
		}
		if m.Refusal != nil {
			s.w.send(m.Refusal)
			continue
		}
		if m.Kind == jsonrpcline.Stray {
			if s.unreadable(v, m.ID, "not a valid JSON-RPC 2.0 response") {
				return nil
			}
			continue
		}
		line, id := m.Line, m.ID
		if mustCarry(id) {
			line, id = carryID(line), nil // a carried id is answered as null here
		}
		if err := json.Unmarshal(line, v); err != nil {
			if m.Kind == jsonrpcline.Response || m.Kind == jsonrpcline.Error {
				// A response is never answered.
				if s.unreadable(v, m.ID, err.Error()) {
					return nil
				}
				continue
			}
			s.w.send(jsonrpcline.ErrorResponse(id, &acp.Error{Code: acp.CodeInvalidRequest, Message: "invalid request: " + err.Error()}))
			continue
		}
		return nil
	}
}

// unreadable handles a response that the agent cannot read (see
// jsonrpcline.Stray), why, which is never answered: it is logged and,
// if its id is one the agent could have sent, decoded into v as an error
// response to that id, so that a request of the agent's that it answers
// ends with that error instead of waiting for ever. It reports whether v
// holds that error response.
func (s *objectStream) unreadable(v any, id json.RawMessage, why string) bool {
	if s.log != nil {
		s.log.Warn("a response the agent cannot read", "why", why, "id", string(id))
	}
	if id == nil {
		return false
	}
	if mustCarry(id) {
		id = carriedID(id)
	}
	resp := jsonrpcline.ErrorResponse(id, &acp.Error{Code: acp.CodeInvalidRequest, Message: "the client's response cannot be read: " + why})
	return json.Unmarshal(resp, v) == nil
}

// WriteObject queues a message; it never blocks on the peer.
func (s *objectStream) WriteObject(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.w.send(restoreID(b))
	return nil
}

// jsonrpc2 carries ids as uint64 or string, but the schema's RequestId is
// any integer in int64, however JSON writes it (-1, 1.0, 1e2). Such an id
// travels inside as a string that no client id can be (jsonrpcline.Check
// refuses string ids with this prefix), holding the id as the client wrote
// it, and its response goes out with it again.
const carriedIDPrefix = jsonrpcline.ReservedIDPrefix

// carryID returns line, a message whose id must be carried (see
// mustCarry), with the id replaced by its carried form.
func carryID(line []byte) []byte {
	var msg map[string]json.RawMessage
	if json.Unmarshal(line, &msg) != nil {
		return line // cannot happen: Check has decoded it
	}
	msg["id"] = carriedID(msg["id"])
	b, err := json.Marshal(msg)
	if err != nil {
		return line // cannot happen: msg was just decoded
	}
	return b
}

// mustCarry reports whether raw is a number that jsonrpc2 would not give
// back as written: anything but a plain decimal uint64.
func mustCarry(raw json.RawMessage) bool {
	if len(raw) == 0 || raw[0] == '"' {
		return false
	}
	_, err := strconv.ParseUint(string(raw), 10, 64)
	return err != nil
}

// carriedID is an id as jsonrpc2 carries it.
func carriedID(raw json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(carriedIDPrefix + string(raw)) // strings always marshal
	return b
}

// restoreID returns a message with the id as the client wrote it back in
// place of a carried one.
func restoreID(b []byte) []byte {
	if !bytes.Contains(b, []byte(`"\u0000shellagent-id:`)) {
		return b
	}
	var msg map[string]json.RawMessage
	var id string
	if json.Unmarshal(b, &msg) != nil || json.Unmarshal(msg["id"], &id) != nil {
		return b
	}
	num, ok := strings.CutPrefix(id, carriedIDPrefix)
	if !ok {
		return b
	}
	msg["id"] = json.RawMessage(num)
	out, err := json.Marshal(msg)
	if err != nil {
		return b // cannot happen: msg was just decoded
	}
	return out
}

// Close does nothing: the input belongs to whoever gave it to NewConn (a
// blocked read of stdin cannot be interrupted anyway), and the writer is
// closed by Conn.Close once the agent has said everything.
func (s *objectStream) Close() error { return nil }
