package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	"shellagent/acp"
)

// DefaultMaxLine is the largest message accepted, in bytes.
const DefaultMaxLine = 16 << 20

// keepLine is the largest line buffer kept between messages; a larger one
// is dropped after use so that one big message does not pin its memory.
const keepLine = 1 << 20

var errTooLong = errors.New("line too long")

// lineReader splits a byte stream into lines: the bytes before each
// '\n', without trailing '\r's. A line longer than max is skipped without
// being held in memory.
type lineReader struct {
	br   *bufio.Reader
	max  int
	line []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return newLineReaderSize(r, max, 64<<10)
}

// newLineReaderSize is newLineReader with a read buffer of size bytes.
func newLineReaderSize(r io.Reader, max, size int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, size), max: max}
}

// next returns the next line. It returns errTooLong after skipping a line
// over the cap, and io.EOF at the end.
func (r *lineReader) next() ([]byte, error) {
	if cap(r.line) > keepLine {
		r.line = nil
	}
	r.line = r.line[:0]
	crs := 0 // trailing '\r's read but not appended: they may end the line
	tooLong, read := false, false
	for {
		frag, err := r.br.ReadSlice('\n')
		read = read || len(frag) > 0
		content := bytes.TrimSuffix(frag, []byte("\n"))
		body := bytes.TrimRight(content, "\r")
		switch {
		case tooLong || len(body) == 0:
		case len(r.line)+crs+len(body) > r.max:
			tooLong, r.line = true, r.line[:0]
		default:
			for range crs {
				r.line = append(r.line, '\r')
			}
			r.line, crs = append(r.line, body...), 0
		}
		crs += len(content) - len(body)
		switch {
		case err == nil:
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && read:
			// A last line without a newline; the next call reports EOF.
		default:
			return nil, err
		}
		if tooLong {
			return nil, errTooLong
		}
		return r.line, nil
	}
}

// objectStream is the jsonrpc2.ObjectStream of a connection: it reads one
// message per line and writes through the connection's Writer. A line that
// is not a valid JSON-RPC message is answered here, and reading goes on.
// While too many replies wait for a client that does not read, it reads
// nothing (see replyBacklog): the kernel then holds the client's
// writes, and every request is answered once the client reads.
type objectStream struct {
	msgs  *MessageReader
	w     *writer
	ready <-chan struct{} // closed when the connection is set up
}

// ReadObject decodes the next valid message into v.
func (s *objectStream) ReadObject(v any) error {
	<-s.ready
	for {
		s.w.replies.wait()
		line, refusal, err := s.msgs.Next()
		if err != nil {
			return err
		}
		if refusal != nil {
			s.w.send(refusal)
			continue
		}
		line = carryID(line)
		if err := json.Unmarshal(line, v); err != nil {
			s.w.send(errorResponse(envelopeID(line), acp.CodeInvalidRequest, "invalid request: "+err.Error()))
			continue
		}
		return nil
	}
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
// travels inside as a string that no client id can be (checkMessage
// refuses string ids with this prefix), holding the id as the client wrote
// it, and its response goes out with it again.
const carriedIDPrefix = "\x00shellagent-id:"

// carryID returns line with an id that jsonrpc2 cannot carry as a number
// replaced by its carried form.
func carryID(line []byte) []byte {
	var msg map[string]json.RawMessage
	if json.Unmarshal(line, &msg) != nil || !mustCarry(msg["id"]) {
		return line
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

// intID returns the value of a JSON number that is an integer in int64,
// however it is written (-1, 1.0, 1e2, 100e-2); ok is false for any other
// number (1.5, 1e19). raw must be a valid JSON number.
func intID(raw []byte) (v int64, ok bool) {
	if v, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return v, true
	}
	s := string(raw)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || e < -400 || e > 400 {
			return 0, false // far beyond int64 either way, or 0 written oddly: refused
		}
		s, exp = s[:i], e
	}
	digits := s
	if i := strings.IndexByte(s, '.'); i >= 0 {
		digits = s[:i] + s[i+1:]
		exp -= len(s) - i - 1
	}
	digits = strings.TrimLeft(digits, "0")
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits, exp = digits[:len(digits)-1], exp+1
	}
	switch {
	case digits == "":
		return 0, true
	case exp < 0 || len(digits)+exp > 19:
		return 0, false
	}
	if neg {
		digits = "-" + digits
	}
	v, err := strconv.ParseInt(digits+strings.Repeat("0", exp), 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// Close does nothing: the input belongs to whoever gave it to NewConn (a
// blocked read of stdin cannot be interrupted anyway), and the writer is
// closed by Conn.Close once the agent has said everything.
func (s *objectStream) Close() error { return nil }

type envelope struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// checkMessage returns the error response for a line that is not a JSON-RPC
// 2.0 message shellagent accepts, or nil.
func checkMessage(line []byte) []byte {
	if !json.Valid(line) {
		return errorResponse(nil, acp.CodeParseError, "parse error: not valid JSON")
	}
	switch line[0] {
	case '{':
	case '[':
		return errorResponse(nil, acp.CodeInvalidRequest, "batch requests are not supported")
	default:
		return errorResponse(nil, acp.CodeInvalidRequest, "a message must be a JSON object")
	}
	var env envelope
	if err := json.Unmarshal(line, &env); err != nil {
		return errorResponse(nil, acp.CodeInvalidRequest, "invalid request: "+err.Error())
	}
	id := validID(env.ID)
	if env.ID != nil && id == nil {
		return errorResponse(nil, acp.CodeInvalidRequest, "id: must be a string or an integer (int64)")
	}
	if env.JSONRPC == nil || *env.JSONRPC != "2.0" {
		return errorResponse(id, acp.CodeInvalidRequest, `jsonrpc: must be "2.0"`)
	}
	switch {
	case env.Method == nil && env.Result == nil && env.Error == nil:
		return errorResponse(id, acp.CodeInvalidRequest, "method: required")
	case env.Method != nil && env.Method[0] != '"':
		return errorResponse(id, acp.CodeInvalidRequest, "method: must be a string")
	}
	return nil
}

// validID returns raw if it is an id the connection can carry back
// unchanged: a string or an integer in int64, written as the client
// likes (see intID).
func validID(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil || strings.HasPrefix(s, carriedIDPrefix) {
			return nil
		}
		return raw
	case 'n', 't', 'f', '{', '[':
		return nil
	}
	if _, ok := intID(raw); !ok {
		return nil
	}
	return raw
}

func envelopeID(line []byte) json.RawMessage {
	var env envelope
	if json.Unmarshal(line, &env) != nil {
		return nil
	}
	return validID(env.ID)
}

// errorResponse returns a complete error response; a nil id is sent as null.
func errorResponse(id json.RawMessage, code int64, msg string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct { // Safe: strings, an int and a valid raw id always marshal
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	return b
}
