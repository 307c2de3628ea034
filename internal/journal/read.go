package journal

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"shellagent/acp"
)

// version is the format's version, in each header.
const version = 1

// record is one line of a file.
type record struct {
	T         string          `json:"t"`
	V         int             `json:"v,omitempty"`
	ID        string          `json:"id,omitempty"`
	At        time.Time       `json:"at,omitzero"`
	Cwd       string          `json:"cwd,omitempty"`
	Title     string          `json:"title,omitempty"`
	Item      string          `json:"item,omitempty"`
	U         json.RawMessage `json:"u,omitempty"`
	Term      string          `json:"term,omitempty"`
	D         json.RawMessage `json:"d,omitempty"` // a base64 string
	N         int64           `json:"n,omitempty"`
	Status    *acp.ExitStatus `json:"status,omitempty"`
	Key       string          `json:"key,omitempty"`
	MessageID string          `json:"messageId,omitempty"`
	Closed    bool            `json:"closed,omitempty"` // of a mark
	Option    string          `json:"option,omitempty"` // of a config record
	Value     *string         `json:"value,omitempty"`  // of a config record
	IDs       map[string]int  `json:"ids,omitempty"`    // of an ids record
}

// ErrCorrupt is the error (a *CorruptError, wrapped) of reading a session
// file that holds a line that is neither JSON nor torn, or no header of
// its session: the file is skipped, and set aside as it is (SetAside).
var ErrCorrupt = errors.New("corrupt session file")

// SetAside is what a corrupt session file ID.jsonl is renamed to
// ID.jsonl+SetAside: the index ignores it, so that it is skipped, and
// logged, once and for all, while it stays on disk for its user to look
// into. It counts in Options.Max, and goes first when the history is
// pruned; Delete of its session removes it.
const SetAside = ".corrupt"

// errNewer says a file's header is of a newer format version: the file
// is skipped, but not set aside, since a newer build may read it.
var errNewer = errors.New("a newer format version")

// A CorruptError says what makes a session file corrupt, and where.
type CorruptError struct {
	Path  string // the file
	Err   error  // what is wrong with it, and at which line
	Aside string // where the file was set aside (SetAside), if it was

	size int64 // the file's size as read
}

func (e *CorruptError) Error() string        { return "corrupt session file: " + e.Err.Error() }
func (e *CorruptError) Unwrap() error        { return e.Err }
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// badFormat is an error of header or lines that makes the file corrupt,
// as opposed to one of reading it.
type badFormat struct{ error }

func (e badFormat) Unwrap() error { return e.error }

// corrupt returns err, a *CorruptError of the file at path, of size
// bytes as read, if err says the file is corrupt (badFormat).
func corrupt(path string, size int64, err error) error {
	var bad badFormat
	if errors.As(err, &bad) {
		return &CorruptError{Path: path, Err: bad.error, size: size}
	}
	return err
}

// History is a session's history as Load reads it.
type History struct {
	Info
	// Updates are the recorded updates in the order first recorded; an
	// item's stands where its first did, with its last content.
	Updates []Item
	// Terminals holds the output and exit of each terminal with output
	// or an exit recorded, by terminal id.
	Terminals map[string]*Output
	// Prompts are the prompts accepted with an idempotencyKey, in order.
	Prompts []Prompt
	// Config holds the value last recorded of each config option, by id.
	Config map[string]string
	// IDs holds, by prefix ("call", "term", "msg"), the highest id
	// number the session reserved (Store.Reserve): it may have shown
	// ids up to it that no other record holds, if its process died.
	IDs map[string]int
}

// Item is one update of a History.
type Item struct {
	Item   string          // "" for an update of its own (a message)
	At     time.Time       // when its last content was recorded
	Update json.RawMessage // the update's JSON (DecodeUpdate)
}

// Output is a terminal of a History.
type Output struct {
	Data    []byte          // its last Options.Scrollback bytes kept; bytes dropped (gaps) are missing
	Written int64           // the bytes it wrote in all, those not kept included
	Exit    *acp.ExitStatus // nil when no exit was recorded
}

// Prompt is a prompt accepted with an idempotencyKey.
type Prompt struct {
	Key, MessageID string
	At             time.Time
}

// DecodeUpdate decodes an Item's Update.
func DecodeUpdate(raw json.RawMessage) (acp.Update, error) {
	var kind struct {
		SessionUpdate string `json:"sessionUpdate"`
	}
	if err := json.Unmarshal(raw, &kind); err != nil {
		return nil, fmt.Errorf("decode update: %w", err)
	}
	var u acp.Update
	switch kind.SessionUpdate {
	case acp.KindUserMessage, acp.KindAgentMessage:
		u = &acp.Message{}
	case acp.KindState:
		u = &acp.StateUpdate{}
	case acp.KindToolCall:
		u = &acp.ToolCallUpdate{}
	case acp.KindTerminal:
		u = &acp.TerminalUpdate{}
	case acp.KindNotice:
		u = &acp.Notice{}
	default:
		return nil, fmt.Errorf("decode update: unknown sessionUpdate %q", kind.SessionUpdate)
	}
	if err := json.Unmarshal(raw, u); err != nil {
		return nil, fmt.Errorf("decode update %s: %w", kind.SessionUpdate, err)
	}
	return u, nil
}

// parsed is what reading a file found.
type parsed struct {
	info    Info
	created time.Time
	valid   int64 // bytes up to the end of the last whole line

	items     []Item
	itemAt    map[string]int // index in items
	itemLen   map[string]int // bytes of the item's last line
	deadItems int64          // bytes of items' earlier lines

	terms     map[string]*termState
	termOrder []string
	prompts   []Prompt
	config    map[string]string
	ids       map[string]int

	keep    keeping
	scroll  int
	scratch []byte // where output is decoded without keepAll

	line   int64            // the offset of the line being applied
	forgot map[string]int64 // the offset of each item's last forget record
	body   int64            // the offset of the line after the header
}

// keeping says what a read keeps besides the sizes and what the index
// lists (each terminal's bytes, its exit, the session's info).
type keeping uint8

const (
	keepSizes   keeping = iota
	keepUpdates         // and the updates: a compaction, which copies the output from the file
	keepAll             // and the updates and each terminal's last scroll bytes: Load
)

// termState is a terminal as a file has it.
type termState struct {
	written int64   // bytes written, dropped ones included
	inFile  int64   // output bytes in the file
	lines   int64   // bytes of the file's out lines
	kept    tailBuf // with keepAll, while the file is read
	data    []byte  // with keepAll, once it is read: the last scroll bytes
	exit    *acp.ExitStatus
}

// readFile reads the session file at path, which must be session id's,
// in full, keeping what keep says.
func readFile(path, id string, scroll int, keep keeping) (*parsed, error) {
	return readWith(openSource, path, id, scroll, keep)
}

// readWith is readFile, opening the file with open.
func readWith(open func(string) (source, error), path, id string, scroll int, keep keeping) (*parsed, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() // Best effort: read only.
	st, ok := f.(interface{ Stat() (os.FileInfo, error) })
	if !ok {
		return nil, errors.New("cannot stat the file")
	}
	fi, err := st.Stat()
	if err != nil {
		return nil, err
	}
	p := newParsed(id, fi.Size(), scroll, keep)
	start, err := p.header(f)
	if err != nil {
		return nil, corrupt(path, fi.Size(), err)
	}
	p.body = start
	if err := p.lines(f, start); err != nil {
		return nil, corrupt(path, fi.Size(), err)
	}
	if keep == keepAll {
		for _, t := range p.terms {
			t.data = t.kept.bytes()
		}
	}
	return p, nil
}

func newParsed(id string, size int64, scroll int, keep keeping) *parsed {
	return &parsed{
		info:   Info{ID: id, Size: size},
		itemAt: make(map[string]int), itemLen: make(map[string]int),
		terms: make(map[string]*termState), config: make(map[string]string), ids: make(map[string]int), keep: keep, scroll: scroll,
	}
}

// maxHeader is the most bytes a header line may take.
const maxHeader = 1 << 10

// header reads and checks the first line of the file r, which has
// p.info.Size bytes; it returns where the next line starts.
func (p *parsed) header(r io.ReaderAt) (int64, error) {
	b := make([]byte, min(p.info.Size, maxHeader))
	n, err := r.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	i := bytes.IndexByte(b[:n], '\n')
	if i < 0 {
		if n < maxHeader {
			return 0, badFormat{errors.New("no header")}
		}
		return 0, badFormat{errors.New("first line is not a header: too long")}
	}
	var rec record
	if err := json.Unmarshal(b[:i+1], &rec); err != nil {
		return 0, badFormat{fmt.Errorf("line 1: %w", err)}
	}
	if err := checkHeader(&rec, p.info.ID); err != nil {
		return 0, badFormat{err}
	}
	p.created, p.info.UpdatedAt = rec.At, rec.At
	p.valid = int64(i + 1)
	return p.valid, nil
}

// lines reads the lines of r from offset from to the end of the file (a
// torn last line is left out), applying each.
func (p *parsed) lines(r io.ReaderAt, from int64) error {
	return eachLine(r, from, p.info.Size, func(line []byte, at int64) error {
		var rec record
		if err := parseLine(line, &rec); err != nil {
			return badFormat{fmt.Errorf("line at byte %d: %w", at, err)}
		}
		p.line = at
		if err := p.add(&rec, len(line)); err != nil {
			return badFormat{fmt.Errorf("line at byte %d: %w", at, err)}
		}
		p.valid = at + int64(len(line))
		if rec.At.After(p.info.UpdatedAt) {
			p.info.UpdatedAt = rec.At
		}
		return nil
	})
}

// eachLine calls fn with each whole line of r from offset from to offset
// end (a torn last line is left out) and the line's offset, until fn
// returns an error. The line is valid until fn returns.
func eachLine(r io.ReaderAt, from, end int64, fn func(line []byte, at int64) error) error {
	br := bufio.NewReaderSize(io.NewSectionReader(r, from, end-from), 128<<10) // an out line of maxChunk bytes fits
	var long []byte
	for at := from; ; {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if errors.Is(err, io.EOF) {
			return nil // a line without its newline is torn: dropped
		}
		if err != nil {
			return err
		}
		if err := fn(line, at); err != nil {
			return err
		}
		at += int64(len(line))
	}
}

func checkHeader(rec *record, id string) error {
	switch {
	case rec.T != "session":
		return fmt.Errorf("first line is a %q record, not the header", rec.T)
	case rec.V > version:
		return fmt.Errorf("format version %d, not %d: %w", rec.V, version, errNewer)
	case rec.V != version:
		return fmt.Errorf("format version %d, not %d", rec.V, version)
	case rec.ID != id:
		return fmt.Errorf("header names session %q", rec.ID)
	}
	return nil
}

// add applies one record of size bytes.
func (p *parsed) add(rec *record, size int) error {
	switch rec.T {
	case "meta":
		p.info.Cwd, p.info.Title = rec.Cwd, rec.Title
	case "update":
		var u json.RawMessage
		if p.keep >= keepUpdates {
			u = append(json.RawMessage(nil), rec.U...)
		}
		if rec.Item == "" {
			p.items = append(p.items, Item{At: rec.At, Update: u})
			break
		}
		if i, ok := p.itemAt[rec.Item]; ok {
			p.items[i].At, p.items[i].Update = rec.At, u
			p.deadItems += int64(p.itemLen[rec.Item])
		} else {
			p.itemAt[rec.Item] = len(p.items)
			p.items = append(p.items, Item{Item: rec.Item, At: rec.At, Update: u})
		}
		p.itemLen[rec.Item] = size
	case "out":
		n, d, err := p.output(rec.D)
		if err != nil {
			return err
		}
		t := p.term(rec.Term)
		t.written += int64(n)
		t.inFile += int64(n)
		t.lines += int64(size)
		if p.keep == keepAll {
			t.kept.write(d, p.scroll)
		}
	case "gap":
		p.term(rec.Term).written += rec.N
	case "forget":
		p.forget(rec.Item)
	case "exit":
		st := acp.ExitStatus{}
		if rec.Status != nil {
			st = *rec.Status
		}
		p.term(rec.Term).exit = &st
	case "prompt":
		p.prompts = append(p.prompts, Prompt{Key: rec.Key, MessageID: rec.MessageID, At: rec.At})
	case "config":
		if rec.Value != nil {
			p.config[rec.Option] = *rec.Value
		}
	case "ids":
		for k, n := range rec.IDs {
			p.ids[k] = max(p.ids[k], n)
		}
	case "mark":
		p.info.Cwd, p.info.Title, p.info.Closed = rec.Cwd, rec.Title, rec.Closed
	case "closed":
		p.info.Closed = true
	case "open":
		p.info.Closed = false
	}
	return nil
}

// output returns the length of an out record's data and the data,
// decoded into p's scratch: valid until the next call.
func (p *parsed) output(raw json.RawMessage) (int, []byte, error) {
	b64, err := outBase64(raw)
	if err != nil {
		return 0, nil, err
	}
	d := p.scratch
	if need := base64.StdEncoding.DecodedLen(len(b64)); cap(d) < need {
		d = make([]byte, need)
	}
	n, err := base64.StdEncoding.Decode(d[:cap(d)], b64)
	if err != nil {
		return 0, nil, fmt.Errorf("out record: %w", err)
	}
	p.scratch = d // add copies what it keeps
	return n, d[:n], nil
}

// outBase64 returns the base64 of an out record's data, unquoted.
func outBase64(raw json.RawMessage) ([]byte, error) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, errors.New("out record without data")
	}
	return raw[1 : len(raw)-1], nil
}

// forget drops an item, and the output and exit of the terminal of the
// same id.
func (p *parsed) forget(item string) {
	if p.forgot == nil {
		p.forgot = make(map[string]int64)
	}
	p.forgot[item] = p.line
	if i, ok := p.itemAt[item]; ok {
		p.items[i] = Item{} // a hole, left out by history and rewrite
		delete(p.itemAt, item)
		p.deadItems += int64(p.itemLen[item])
		delete(p.itemLen, item)
	}
	if t := p.terms[item]; t != nil {
		delete(p.terms, item)
		p.termOrder = slices.DeleteFunc(p.termOrder, func(id string) bool { return id == item })
		p.deadItems += t.lines
	}
}

// updates returns the items without the holes that forget left.
func (p *parsed) updates() []Item {
	return slices.DeleteFunc(p.items, func(it Item) bool { return it.Update == nil && it.Item == "" && it.At.IsZero() })
}

func (p *parsed) term(id string) *termState {
	t := p.terms[id]
	if t == nil {
		t = &termState{}
		p.terms[id] = t
		p.termOrder = append(p.termOrder, id)
	}
	return t
}

// history returns what Load returns.
func (p *parsed) history() *History {
	h := &History{Info: p.info, Updates: p.updates(), Prompts: p.prompts, Config: p.config, IDs: p.ids, Terminals: make(map[string]*Output, len(p.terms))}
	for id, t := range p.terms {
		h.Terminals[id] = &Output{Data: t.data, Written: t.written, Exit: t.exit}
	}
	return h
}
