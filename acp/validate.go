package acp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
)

// The checks each request's params pass before an agent sees them (the
// Validate methods): required fields, reported as -32602 naming the first
// missing one, and content blocks as the schema describes them.

func required(field, v string) error {
	if v == "" {
		return InvalidParams("%s: required", field)
	}
	return nil
}

// absolute refuses a path that the schema says must be absolute (its
// AbsolutePath: in the native syntax of the machine the agent runs on)
// and is not: the cwd of session/new, session/list, session/resume and
// v1's session/load, and their additionalDirectories.
func absolute(field, path string) error {
	if !filepath.IsAbs(path) {
		return InvalidParams("%s: must be an absolute path, got %q", field, path)
	}
	return nil
}

// directories refuses the first of dirs, additionalDirectories, that is
// not absolute.
func directories(dirs []string) error {
	for i, d := range dirs {
		if err := absolute(fmt.Sprintf("additionalDirectories[%d]", i), d); err != nil {
			return err
		}
	}
	return nil
}

// first returns the first non-nil error.
func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Validate names the first field of p that is missing or malformed, as a -32602 error.
func (p *InitializeRequest) Validate() error {
	if p.ProtocolVersion == nil {
		return InvalidParams("protocolVersion: required")
	}
	return nil
}

// Validate names the first field of p that is missing or malformed, as a
// -32602 error: cwd and each of additionalDirectories must be absolute.
// (Whether cwd is a directory is the agent's to check.)
func (p *NewSessionRequest) Validate() error {
	return first(required("cwd", p.Cwd), absolute("cwd", p.Cwd), directories(p.AdditionalDirectories))
}

// Validate names the first field of p that is missing or malformed, as a
// -32602 error: cwd, if given, must be absolute.
func (p *ListSessionsRequest) Validate() error {
	if p.Cwd == nil {
		return nil
	}
	return absolute("cwd", *p.Cwd)
}

// Validate names the first field of p that is missing or malformed, as a -32602 error.
func (p *CloseSessionRequest) Validate() error { return required("sessionId", p.SessionID) }

// Validate reports what is wrong with the params; nothing is cancelled
// then (a notification has no answer to carry it).
func (p *CancelSessionNotification) Validate() error { return required("sessionId", p.SessionID) }

// Validate names the first field of p that is missing or malformed, as a -32602 error.
func (p *DeleteSessionRequest) Validate() error { return required("sessionId", p.SessionID) }

// Validate names the first field of p that is missing or malformed, as a
// -32602 error: cwd and each of additionalDirectories must be absolute.
func (p *ResumeSessionRequest) Validate() error {
	return first(required("sessionId", p.SessionID), required("cwd", p.Cwd), absolute("cwd", p.Cwd), directories(p.AdditionalDirectories))
}

// Validate names the first field of p that is missing or malformed, as a -32602 error.
func (p *PromptRequest) Validate() error {
	if err := required("sessionId", p.SessionID); err != nil {
		return err
	}
	if len(p.Prompt) == 0 {
		return InvalidParams("prompt: must be a non-empty array of content blocks")
	}
	if n := len(p.Prompt); n > MaxBlocks {
		return InvalidParams("prompt: %d content blocks, more than the %d a prompt may hold; join the text into fewer blocks", n, MaxBlocks)
	}
	for i, b := range p.Prompt {
		if err := checkBlock(fmt.Sprintf("prompt[%d]", i), b.Raw); err != nil {
			return err
		}
	}
	return nil
}

// Validate names the first field of p that is missing or malformed, as a -32602 error.
func (p *CancelTerminalRequest) Validate() error {
	return first(required("sessionId", p.SessionID), required("terminalId", p.TerminalID))
}

// MaxBlocks is the most content blocks a prompt may hold. A session keeps
// its prompts' blocks (each replay sends them), and a block costs a few
// hundred bytes however little it says: without the bound, a 5 MB line of
// 200,000 one-letter blocks kept 75 MB.
const MaxBlocks = 1000

// MaxWrite is the most bytes one _shellagent/terminal/write takes: a
// PTY's input buffer holds far less (about 4 KiB for a line being typed),
// so a larger write could only fail.
const MaxWrite = 64 << 10

// Validate names the first field of p that is missing or malformed, as a
// -32602 error, and decodes Data.
func (p *WriteTerminalRequest) Validate() error {
	if err := first(required("sessionId", p.SessionID), required("terminalId", p.TerminalID), required("data", p.Data)); err != nil {
		return err
	}
	b, err := base64.StdEncoding.DecodeString(p.Data)
	switch {
	case err != nil:
		return InvalidParams("data: must be base64 (standard alphabet, padded): %v", err)
	case len(b) > MaxWrite:
		return InvalidParams("data: %d bytes; at most %d can be written at once", len(b), MaxWrite)
	}
	p.bytes = b
	return nil
}

// MaxTerminalSide is the largest number of columns or rows a terminal can
// be given.
const MaxTerminalSide = 10000

// Validate names the first field of p that is missing or malformed, as a
// -32602 error; a command of spaces alone is missing, as a prompt of them
// is empty.
func (p *LookSessionRequest) Validate() error {
	return first(required("sessionId", p.SessionID), required("command", strings.TrimSpace(p.Command)))
}

// MaxServiceLines is the most lines a first "_shellagent/service/read"
// may ask for, as /logs shows at most.
const MaxServiceLines = 1000

// The ranges of ReadServiceRequest's integer members.
var (
	serviceOffset = IntRange{0, math.MaxInt64}
	serviceLines  = IntRange{0, MaxServiceLines}
)

// Validate names the first field of p that is missing or malformed, as a
// -32602 error.
func (p *ReadServiceRequest) Validate() error {
	if err := first(required("sessionId", p.SessionID), required("name", p.Name)); err != nil {
		return err
	}
	if err := first(serviceOffset.Check("offset", p.Offset), serviceLines.Check("lines", int64(p.Lines))); err != nil {
		return err
	}
	switch {
	case p.Offset > 0 && p.TerminalID == "":
		return InvalidParams("offset: given without terminalId")
	case p.Lines > 0 && p.TerminalID != "":
		return InvalidParams("lines: given with terminalId (lines start a read; terminalId and offset go on with one)")
	}
	return nil
}

// IntRange returns the range of the integer member at path ("lines"),
// which Validate checks.
func (p *ReadServiceRequest) IntRange(path string) (IntRange, bool) {
	switch path {
	case "offset":
		return serviceOffset, true
	case "lines":
		return serviceLines, true
	}
	return IntRange{}, false
}

// Validate names the first field of p that is missing or malformed, as a -32602 error.
func (p *ResizeTerminalRequest) Validate() error {
	if err := first(required("sessionId", p.SessionID), required("terminalId", p.TerminalID)); err != nil {
		return err
	}
	if p.Size == nil {
		return InvalidParams("size: required ({\"cols\": N, \"rows\": N})")
	}
	return p.Size.Validate("size")
}

// IntRange returns the range of the integer member at path ("size.cols"),
// which Validate checks.
func (p *ResizeTerminalRequest) IntRange(path string) (IntRange, bool) {
	switch path {
	case "size.cols", "size.rows":
		return terminalSide, true
	}
	return IntRange{}, false
}

// terminalSide is the range of a terminal's columns and rows.
var terminalSide = IntRange{1, MaxTerminalSide}

// Validate names the side of a terminal size that is out of range (1 to
// MaxTerminalSide), as a -32602 error; field names the size ("size").
func (s TerminalSize) Validate(field string) error {
	return first(terminalSide.Check(field+".cols", int64(s.Cols)), terminalSide.Check(field+".rows", int64(s.Rows)))
}

// Validate names the first field of p that is missing or malformed, as a -32602 error.
func (p *CancelToolCallRequest) Validate() error {
	return first(required("sessionId", p.SessionID), required("toolCallId", p.ToolCallID))
}

// Validate names the first field of p that is missing or malformed, as a -32602 error.
func (p *SetConfigOptionRequest) Validate() error {
	return first(required("sessionId", p.SessionID), required("configId", p.ConfigID))
}

// Content blocks are checked against the schema's ContentBlock definitions
// (types, required fields, bounds; formats such as uri are annotations and
// are not asserted), so that a block the schema forbids is refused with
// -32602 naming the field instead of being echoed in a user_message.

// jsonKind is a set of JSON value types.
type jsonKind uint8

const (
	kString jsonKind = 1 << iota
	kNumber
	kInteger
	kObject
	kArray
	kBool
	kNull
)

// kindOf returns the type of a JSON value; an integer (a number whose
// fractional part is zero, 2.0 as 2) is also a number.
func kindOf(raw json.RawMessage) jsonKind {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return 0
	}
	switch raw[0] {
	case '"':
		return kString
	case '{':
		return kObject
	case '[':
		return kArray
	case 't', 'f':
		return kBool
	case 'n':
		return kNull
	}
	if _, ok := integerText(string(bytes.TrimRight(raw, " \t\r\n"))); !ok {
		return kNumber
	}
	return kNumber | kInteger
}

func (k jsonKind) String() string {
	var names []string
	for _, n := range []struct {
		k    jsonKind
		name string
	}{{kString, "a string"}, {kInteger, "an integer"}, {kNumber, "a number"}, {kObject, "an object"}, {kArray, "an array"}, {kBool, "a boolean"}, {kNull, "null"}} {
		if k&n.k != 0 && !(n.k == kNumber && k&kInteger != 0) {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, " or ")
}

// field is one property of an object in the schema.
type field struct {
	name     string
	kinds    jsonKind
	required bool
	// check checks a non-null value; an integer member's check also gets
	// a number with a fractional part, to refuse it saying the range.
	check func(path string, raw json.RawMessage) error
}

var (
	metaField         = field{"_meta", kObject | kNull, false, nil}
	annotationsField  = field{"annotations", kObject | kNull, false, checkObject(annotationsFields)}
	annotationsFields = []field{
		{"audience", kArray | kNull, false, checkItems(kString, nil)},
		{"lastModified", kString | kNull, false, nil},
		{"priority", kNumber | kNull, false, checkRange(0, 1)},
		metaField,
	}
	iconFields = []field{
		{"src", kString, true, nil},
		{"mimeType", kString | kNull, false, nil},
		{"sizes", kArray | kNull, false, checkItems(kString, nil)},
		{"theme", kString | kNull, false, nil},
		metaField,
	}
	// blockFields are the properties of each content block type; other
	// types ("Custom or future content block") need only a type.
	blockFields = map[string][]field{
		"text": {{"text", kString, true, nil}, annotationsField, metaField},
		"image": {{"data", kString, true, nil}, {"mimeType", kString, true, nil},
			{"uri", kString | kNull, false, nil}, annotationsField, metaField},
		"audio": {{"data", kString, true, nil}, {"mimeType", kString, true, nil}, annotationsField, metaField},
		"resource_link": {{"name", kString, true, nil}, {"uri", kString, true, nil},
			{"title", kString | kNull, false, nil}, {"description", kString | kNull, false, nil},
			{"icons", kArray | kNull, false, checkItems(kObject, checkObject(iconFields))},
			{"mimeType", kString | kNull, false, nil}, {"size", kInteger | kNull, false, checkInteger(IntRange{0, math.MaxUint64})},
			annotationsField, metaField},
		"resource": {{"resource", kObject, true, checkResource}, annotationsField, metaField},
	}
)

// checkBlock checks one content block; path names it ("prompt[0]").
func checkBlock(path string, raw json.RawMessage) error {
	if kindOf(raw) != kObject {
		return InvalidParams("%s: must be a content block object", path)
	}
	var typ struct {
		Type json.RawMessage `json:"type"`
	}
	if err := json.Unmarshal(raw, &typ); err != nil {
		return InvalidParams("%s: %v", path, err)
	}
	if typ.Type == nil {
		return InvalidParams("%s.type: required", path)
	}
	var t string
	if err := json.Unmarshal(typ.Type, &t); err != nil {
		return InvalidParams("%s.type: must be a string", path)
	}
	return checkFields(path, raw, blockFields[t])
}

// checkFields checks the properties of an object.
func checkFields(path string, raw json.RawMessage, fields []field) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return InvalidParams("%s: %v", path, err)
	}
	for _, f := range fields {
		v, ok := obj[f.name]
		p := path + "." + f.name
		switch k := kindOf(v); {
		case !ok && f.required:
			return InvalidParams("%s: required", p)
		case !ok:
		case k&f.kinds == 0 && (k != kNumber || f.kinds&kInteger == 0 || f.check == nil):
			return InvalidParams("%s: must be %s", p, f.kinds)
		case k != kNull && f.check != nil:
			if err := f.check(p, v); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkObject(fields []field) func(string, json.RawMessage) error {
	return func(path string, raw json.RawMessage) error { return checkFields(path, raw, fields) }
}

func checkItems(kinds jsonKind, check func(string, json.RawMessage) error) func(string, json.RawMessage) error {
	return func(path string, raw json.RawMessage) error {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return InvalidParams("%s: %v", path, err)
		}
		for i, v := range items {
			p := fmt.Sprintf("%s[%d]", path, i)
			if kindOf(v)&kinds == 0 {
				return InvalidParams("%s: must be %s", p, kinds)
			}
			if check != nil {
				if err := check(p, v); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

func checkRange(lo, hi float64) func(string, json.RawMessage) error {
	return func(path string, raw json.RawMessage) error {
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil || v < lo || v > hi {
			return InvalidParams("%s: must be from %v to %v", path, lo, hi)
		}
		return nil
	}
}

// checkInteger checks an integer member (or a number with a fractional
// part in its place: the message says which integers it takes).
func checkInteger(r IntRange) func(string, json.RawMessage) error {
	return func(path string, raw json.RawMessage) error {
		lit := string(bytes.TrimSpace(raw))
		if _, ok := r.Integer(lit); !ok {
			return r.Refuse(path, lit)
		}
		return nil
	}
}

// checkResource checks an embedded resource: text or blob contents, with
// a uri.
func checkResource(path string, raw json.RawMessage) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return InvalidParams("%s: %v", path, err)
	}
	contents := "text"
	if _, ok := obj["text"]; !ok {
		if _, ok := obj["blob"]; ok {
			contents = "blob"
		}
	}
	return checkFields(path, raw, []field{
		{contents, kString, true, nil}, {"uri", kString, true, nil}, {"mimeType", kString | kNull, false, nil}, metaField,
	})
}
