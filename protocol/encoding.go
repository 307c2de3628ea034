package protocol

import (
	"encoding/json"
	"strconv"

	"shellagent/acp"
)

// An encoding turns what the writer sends into wire lines. The writer's
// machinery (ordering, coalescing, streaming output from sources in turn,
// flow control) is the same for every protocol front; only the encoding
// differs. ACP v2 (acpV2) sends updates as session/update notifications and
// output as base64 terminal_output_chunk; a Front brings its own Encoding
// (see Front.Initialize, and frontEncoding in front.go, which the writer
// calls).
//
// Every method is called on the writer's goroutine only, except output,
// which is called with the writer's lock held when a terminal's first
// update is queued.
type encoding interface {
	// appendUpdate appends the line(s), newline included, that carry a
	// session update; it may append nothing.
	appendUpdate(dst []byte, session string, update acp.Update) ([]byte, error)
	// output returns the encoder of one terminal's output.
	output(session, terminal string) outputEncoder
	// attached says that the client attaches to session again from this
	// point of the stream on (session/resume, session/load): it knows
	// none of the session's tool calls and terminals, even on the
	// connection that created them.
	attached(session string)
}

// An outputEncoder encodes one terminal's output.
type outputEncoder interface {
	// appendChunk appends the line that carries the terminal's next bytes.
	appendChunk(dst, p []byte) []byte
	// appendReplacement appends the line that replaces the client's copy
	// of the output with data, dropped bytes after what the client had (or
	// after the terminal's start, for a client that had nothing). u, if
	// not nil, is the terminal update the replacement goes with.
	appendReplacement(dst []byte, u *acp.TerminalUpdate, data []byte, dropped int64) ([]byte, error)
}

// acpV2 is the ACP v2 encoding.
type acpV2 struct{}

// sessionNotification is the params of "session/update": a v2 update, or
// one of a front's own updates (Wire.Notify).
type sessionNotification struct {
	SessionID string `json:"sessionId"`
	Update    any    `json:"update"`
}

type notification struct {
	JSONRPC string              `json:"jsonrpc"`
	Method  string              `json:"method"`
	Params  sessionNotification `json:"params"`
}

func (acpV2) appendUpdate(dst []byte, session string, update acp.Update) ([]byte, error) {
	return appendNotification(dst, session, update)
}

// appendNotification appends a session/update notification, newline
// included.
func appendNotification(dst []byte, session string, update any) ([]byte, error) {
	b, err := json.Marshal(notification{"2.0", "session/update", sessionNotification{session, update}})
	if err != nil {
		return dst, err
	}
	return append(append(dst, b...), '\n'), nil
}

func (acpV2) output(session, terminal string) outputEncoder {
	sid, _ := json.Marshal(session)  // strings always marshal
	tid, _ := json.Marshal(terminal) // likewise
	const (
		head1 = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":`
		head2 = `,"update":`
		chunk = `{"sessionUpdate":"terminal_output_chunk","terminalId":`
		data  = `,"data":"`
	)
	// One exact allocation per terminal: idle terminals are many.
	b := make([]byte, 0, len(head1)+len(sid)+len(head2)+len(chunk)+len(tid)+len(data))
	b = append(append(append(b, head1...), sid...), head2...)
	head := len(b)
	b = append(append(append(b, chunk...), tid...), data...)
	return &v2Output{prefix: b, head: head, tid: head + len(chunk)}
}

// attached does nothing: a v2 client is sent the session's current state
// on attach, whatever it knew.
func (acpV2) attached(string) {}

// v2Output writes lines by appending to a prefix built once per terminal:
// a chunk costs a copy and a base64 encoding, no allocation.
type v2Output struct {
	prefix []byte // a terminal_output_chunk line up to its data
	head   int    // prefix[:head] is a session/update notification up to the update object
	tid    int    // prefix[tid:] starts with the quoted terminal id
}

func (o *v2Output) appendChunk(dst, p []byte) []byte {
	dst = append(dst, o.prefix...)
	dst = appendBase64(dst, p)
	return append(dst, "\"}}}\n"...)
}

func (o *v2Output) appendReplacement(dst []byte, u *acp.TerminalUpdate, data []byte, dropped int64) ([]byte, error) {
	dst = append(dst, o.prefix[:o.head]...)
	if u != nil {
		b, err := json.Marshal(u)
		if err != nil {
			return dst, err
		}
		dst = append(dst, b[:len(b)-1]...) // unclosed, to add the output
	} else {
		tid := o.prefix[o.tid : len(o.prefix)-len(`,"data":"`)]
		dst = append(dst, `{"sessionUpdate":"terminal_update","terminalId":`...)
		dst = append(dst, tid...)
	}
	dst = append(dst, `,"output":{"data":"`...)
	dst = appendBase64(dst, data)
	dst = append(dst, '"')
	if dropped > 0 {
		dst = append(dst, `,"_meta":{"shellagent":{"droppedBytes":`...)
		dst = strconv.AppendInt(dst, dropped, 10)
		dst = append(dst, "}}"...)
	}
	return append(dst, "}}}}\n"...), nil
}
