// Package replay plays a recorded ACP exchange (a transcript: see Read)
// back as the agent, to a live client, and reports where the client
// departed from it. A client developer can capture an exchange with any
// agent (shellagent client --trace) and replay it without that agent.
//
// The player answers the client's messages with the agent lines that
// followed them in the transcript: each client line of the transcript, in
// order, waits for the client's message of the same kind and method (for
// a response, to the same request), and then the agent lines up to the
// next client line are sent at once. See Play for what counts as a
// departure and how the placeholders of the golden transcripts are
// treated.
//
// Files: transcript.go (reading a transcript), play.go (Play: matching
// the client's messages, the departures), message.go (what kind of
// JSON-RPC message a line is), value.go (JSON values compared member by
// member, with the first difference named), outbox.go (the writer to the
// client, which bounds what a client that does not read can make wait).
package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"shellagent/acp"
	"shellagent/internal/jsonrpcline"
)

// A Departure is a place where the client did not do what the transcript
// says.
type Departure struct {
	Line int    // the transcript's line number: the line the client departed from
	What string // what the client did instead
}

func (d Departure) String() string { return fmt.Sprintf("line %d: %s", d.Line, d.What) }

// Options tune Play.
type Options struct {
	// Report, if not nil, is called with each departure as it is found,
	// on Play's goroutine.
	Report func(Departure)
	// MaxLine is the longest line accepted from the client
	// (jsonrpcline.DefaultMaxLine if 0): a longer one is refused as the
	// agent refuses it.
	MaxLine int
	// FlushTimeout is how long Play waits, once the client's input has
	// ended, for a client that reads nothing to take the last lines
	// (DefaultFlushTimeout if 0).
	FlushTimeout time.Duration
}

// DefaultFlushTimeout is Options.FlushTimeout's default.
const DefaultFlushTimeout = time.Second

// maxNeverSent is how many client lines left unsent are reported one by
// one; the rest are counted in one more report.
const maxNeverSent = 10

// Play plays t to a client: it reads the client's messages from in and
// writes the transcript's agent lines to out, and returns the departures
// (see below for when it returns).
//
// Each client message is compared with the next client line of the
// transcript. These are departures, each reported with the transcript's
// line number:
//   - a message of another kind or method than that line (for a response,
//     one to another request): it is not played, the line still waits; a
//     request is answered with a -32603 error, a line the agent refuses
//     (not JSON, a batch …) with the agent's own error (while fewer than
//     1,024 such answers wait to be written: a client that floods and
//     does not read gets no more);
//   - a message with the same method whose contents differ: it takes the
//     line's place and gets its answer; the first difference is reported;
//   - any message after the transcript's last client line;
//   - client lines never sent when the replay ends (the first ten named).
//
// Contents compare as JSON values: members in any order, numbers by
// value; past the first 65,536 values of a message (maxValues), an array
// or object compares as its text, white space aside, and its strings do
// not stand for the client's directory. Not compared: a request's id (the answer goes out with the
// client's id), and initialize's params.info and params.clientInfo
// (who the client is, not what it asks for). Lines that were not JSON
// compare as text.
//
// The transcript's directory (the cwd of its first client line with one,
// "/cwd" in the golden transcripts) stands for the client's: the cwd the
// client sends in that line's place is taken as its directory, and every
// string of the transcript that names the transcript's directory names the
// client's instead, in the client lines it is compared with and in the
// agent lines sent (but not in a terminal_output_chunk's base64 data). An
// "updatedAt" of "TIME" is sent as the current time. The golden
// transcripts' other placeholders (VERSION, MODE, pid PID, age AGE,
// waited WAITED, PROCESSES) are free text and are sent as they are.
//
// The agent's requests (session/request_permission) are sent with their
// ids, and the client's answers are compared with the transcript's, ids
// included. Responses of the transcript go out with the id of the
// client's request they answer; lines that were not JSON as they were.
//
// Lines are written to out by a goroutine of Play's, and read from in by
// another: a client that does not read never stops Play from reading, and
// a client that closed out (ctx ends, say) does not hold Play in a read.
// Play returns when in ends, when a write to out fails, or when ctx ends;
// a read of in under way then ends when in does. Once in has ended, Play
// waits for the lines left to be written as long as the client takes one
// every FlushTimeout; otherwise it returns, and the write under way ends
// when out's Write does.
func Play(ctx context.Context, t *Transcript, in io.Reader, out io.Writer, opts Options) ([]Departure, error) {
	if opts.FlushTimeout == 0 {
		opts.FlushTimeout = DefaultFlushTimeout
	}
	p := newPlayer(t, opts.Report)
	p.out = newOutbox(out, len(t.Lines))
	stop := make(chan struct{})
	defer close(stop)
	lines := readLines(in, opts.MaxLine, stop)
	p.sendAgentLines()
	var err error
loop:
	for {
		select {
		case l := <-lines:
			if l.err != nil {
				err = l.err
				break loop
			}
			p.receive(l.text, l.refusal)
		case <-p.out.broken:
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("replay: reading the client: %w", err)
	}
	p.neverSent()
	if werr := p.out.close(opts.FlushTimeout); werr != nil && err == nil {
		err = fmt.Errorf("replay: writing to the client: %w", werr)
	}
	return p.departures, err
}

// clientLine is a line read from the client (see
// jsonrpcline.Reader.Next), or the error that ended the input.
type clientLine struct {
	text, refusal []byte
	err           error
}

// readLines reads in on a goroutine of its own, until in ends (the last
// line carries the error, io.EOF at the end) or stop is closed.
func readLines(in io.Reader, max int, stop <-chan struct{}) <-chan clientLine {
	lines := make(chan clientLine)
	go func() {
		r := jsonrpcline.NewReader(in, max)
		for {
			m, err := r.Next()
			l := clientLine{text: bytes.Clone(m.Line), refusal: m.Refusal, err: err}
			select {
			case lines <- l:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return lines
}

// player is the state of one replay. It is owned by Play's goroutine.
type player struct {
	lines      []Line
	next       int               // index in lines of the next line to play
	ids        map[string][]byte // the client's id of each request played, by the transcript's id (their JSON text)
	dir        string            // the transcript's directory, "" if none
	clientDir  string            // the client's, once it has sent it
	out        *outbox
	departures []Departure
	report     func(Departure)
}

func newPlayer(t *Transcript, report func(Departure)) *player {
	p := &player{lines: t.Lines, ids: map[string][]byte{}, report: report}
	for i, l := range t.Lines {
		if l.From != Client {
			continue
		}
		if d := p.client(i).v.stringAt("params", "cwd"); strings.HasPrefix(d, "/") && d != "/" {
			p.dir = d
			break
		}
	}
	return p
}

// client returns the transcript's line i, a client line, classified. A
// line is classified each time it is needed, so that the player holds
// the tree of a few messages at a time, not of the whole transcript.
func (p *player) client(i int) message { return classify(p.lines[i].Msg) }

// depart records a departure from the transcript's line num.
func (p *player) depart(num int, format string, args ...any) {
	d := Departure{Line: num, What: fmt.Sprintf(format, args...)}
	p.departures = append(p.departures, d)
	if p.report != nil {
		p.report(d)
	}
}

// receive plays one line from the client.
func (p *player) receive(text, refusal []byte) {
	if text == nil { // over the size cap
		p.depart(p.here(), "a line longer than the agent accepts")
		p.out.sendOwn(refusal)
		return
	}
	m := classify(text)
	if p.next == len(p.lines) {
		p.depart(p.here(), "%s, after the transcript's last line", m)
		p.answer(m, refusal, "the transcript has ended")
		return
	}
	w := p.client(p.next)
	num := p.lines[p.next].Num
	if !sameCall(w, m) {
		p.depart(num, "want %s, got %s", w, m)
		p.answer(m, refusal, fmt.Sprintf("line %d of the transcript is %s", num, w))
		return
	}
	if d := p.diff(w, m); d != "" {
		p.depart(num, "%s differs: %s", w, d)
	}
	if w.kind == request {
		p.ids[string(w.id.append(nil))] = m.id.append(nil)
	}
	p.next++
	p.sendAgentLines()
}

// here is the line number a message that has no line of its own is
// reported at: the next line to play, or the last line.
func (p *player) here() int {
	if p.next < len(p.lines) {
		return p.lines[p.next].Num
	}
	if len(p.lines) == 0 {
		return 0
	}
	return p.lines[len(p.lines)-1].Num
}

// answer answers a message that has no place in the transcript: a line the
// agent refuses with the agent's error, a request with an error that says
// why.
func (p *player) answer(m message, refusal []byte, why string) {
	switch {
	case refusal != nil:
		p.out.sendOwn(refusal)
	case m.kind == request:
		p.out.sendOwn(jsonrpcline.ErrorResponse(m.id.append(nil), &acp.Error{Code: acp.CodeInternalError, Message: fmt.Sprintf("replay: %s is not in the transcript here: %s", m, why)}))
	}
}

// diff compares the client's message m with the transcript's w, which is
// of the same kind and method.
func (p *player) diff(w, m message) string {
	if w.kind == malformed {
		if !bytes.Equal(w.text, m.text) {
			return fmt.Sprintf("want %s, got %s", quote(string(w.text)), quote(string(m.text)))
		}
		return ""
	}
	if p.dir != "" && p.clientDir == "" && w.v.stringAt("params", "cwd") == p.dir {
		p.clientDir = m.v.stringAt("params", "cwd")
	}
	d := differ{
		want: p.toClient,
		skip: func(path string) bool {
			return path == "id" && w.kind == request ||
				w.method == "initialize" && (path == "params.info" || path == "params.clientInfo")
		},
	}
	return d.diff("", w.v, m.v)
}

// toClient returns s with the transcript's directory replaced by the
// client's, where s names it: followed by nothing, a slash or a character
// other than a letter, a digit, '_' and '-' (so "/cwd." at the end of a
// sentence is "/cwd", and "/cwdx" is another directory).
func (p *player) toClient(s string) string {
	if p.dir == "" || p.clientDir == "" || p.clientDir == p.dir || !strings.Contains(s, p.dir) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, p.dir)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		rest := s[i+len(p.dir):]
		if rest == "" || !strings.ContainsRune(nameChars, rune(rest[0])) {
			b.WriteString(p.clientDir)
		} else {
			b.WriteString(p.dir)
		}
		s = rest
	}
}

// nameChars are the characters that continue a directory's name.
const nameChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"

// sendAgentLines sends the agent lines from the next line on, up to the
// next client line.
func (p *player) sendAgentLines() {
	for ; p.next < len(p.lines) && p.lines[p.next].From == Agent; p.next++ {
		p.out.send(p.agentLine(p.lines[p.next].Msg))
	}
}

// agentLine returns an agent line as it is sent: a response with the id of
// the client's request, the placeholders replaced.
func (p *player) agentLine(msg []byte) []byte {
	m := classify(msg)
	if m.kind == malformed {
		return msg
	}
	if m.kind == response {
		if id, ok := p.ids[string(m.id.append(nil))]; ok {
			*m.id = value{raw: id}
		}
	}
	p.fill(m.v, "", false)
	return m.v.append(nil)
}

// fill replaces the placeholders in v, the value of member key (chunk: of
// a terminal_output_chunk update).
func (p *player) fill(v *value, key string, chunk bool) {
	switch v.kind {
	case '{':
		chunk := v.stringAt("sessionUpdate") == "terminal_output_chunk"
		for _, m := range v.members {
			p.fill(m.val, m.name, chunk)
		}
	case '[':
		for _, e := range v.elems {
			p.fill(e, "", false)
		}
	case '"':
		switch {
		case key == "updatedAt" && v.str == "TIME":
			v.setString(time.Now().UTC().Format(time.RFC3339Nano))
		case key == "data" && chunk:
		default:
			if s := p.toClient(v.str); s != v.str {
				v.setString(s)
			}
		}
	}
}

// neverSent reports the client lines not played.
func (p *player) neverSent() {
	n := 0
	for i := p.next; i < len(p.lines); i++ {
		if p.lines[i].From != Client {
			continue
		}
		if n++; n <= maxNeverSent {
			p.depart(p.lines[i].Num, "never sent: %s", p.client(i))
		}
	}
	if n > maxNeverSent {
		p.depart(p.lines[len(p.lines)-1].Num, "and %d more client lines never sent", n-maxNeverSent)
	}
}
