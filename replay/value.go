package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// A value is a JSON value as it was read: objects keep their members in
// order and scalars keep their text, so that a value written back with
// append is the same text, white space between tokens aside, except where
// it was changed. An array or object of a message with more than
// maxValues values is held as its text (kind opaque).
type value struct {
	kind    byte     // '{', '[', '"', opaque, or 0 for a number, true, false or null
	raw     []byte   // scalars and opaque values: the text as read
	str     string   // strings: the decoded text
	members []member // objects
	elems   []*value // arrays
}

// opaque is the kind of an array or object held as its text.
const opaque = 'r'

// member is a member of an object.
type member struct {
	name    string
	rawName []byte // as read, quotes included
	val     *value
}

// maxDepth is the deepest nesting parseValue accepts, as encoding/json's
// Unmarshal does.
const maxDepth = 10000

// maxValues is about how many values of one message parseValue holds as a
// tree, at about a hundred bytes each: without a bound, a 16 MiB message
// of small numbers, which the agent accepts, took a gigabyte. Past it,
// each array or object below the top is held as its text (opaque), and
// the top one too once it has had as many again. Tests lower it.
var maxValues = 1 << 16

// parseValue parses b, which must hold exactly one JSON value nested at
// most maxDepth deep.
func parseValue(b []byte) (*value, error) { return parseBounded(b, maxValues) }

// parseBounded is parseValue with a tree of about n values.
func parseBounded(b []byte, n int) (*value, error) {
	p := &parser{d: json.NewDecoder(bytes.NewReader(b)), b: b, left: n, budget: n}
	p.d.UseNumber()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if _, err := p.d.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// parser reads tokens with the bytes they were read from.
type parser struct {
	d      *json.Decoder
	b      []byte
	end    int64 // where the last token ended
	left   int   // values the tree may still take; below 0 once the top one goes on past the budget
	budget int
}

// token returns the next token and its text.
func (p *parser) token() (json.Token, []byte, error) {
	tok, err := p.d.Token()
	if err != nil {
		return nil, nil, err
	}
	start, end := p.end, p.d.InputOffset()
	p.end = end
	// Between tokens there are only white space, ',' and ':'.
	for start < end && strings.IndexByte(" \t\r\n,:", p.b[start]) >= 0 {
		start++
	}
	return tok, p.b[start:end], nil
}

func (p *parser) value(depth int) (*value, error) {
	tok, raw, err := p.token()
	if err != nil {
		return nil, err
	}
	p.left--
	switch t := tok.(type) {
	case json.Delim:
		if depth == maxDepth {
			return nil, errors.New("nested too deep")
		}
		open := p.end - 1
		v := &value{kind: byte(t)}
		for p.d.More() {
			if p.left <= 0 && (depth > 0 || p.left <= -p.budget) {
				return p.skip(open, depth)
			}
			if t == '[' {
				e, err := p.value(depth + 1)
				if err != nil {
					return nil, err
				}
				v.elems = append(v.elems, e)
				continue
			}
			name, rawName, err := p.token()
			if err != nil {
				return nil, err
			}
			e, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			v.members = append(v.members, member{name: name.(string), rawName: rawName, val: e})
		}
		if _, _, err := p.token(); err != nil { // the closing delimiter
			return nil, err
		}
		return v, nil
	case string:
		return &value{kind: '"', raw: raw, str: t}, nil
	default:
		return &value{raw: raw}, nil
	}
}

// skip reads the rest of the array or object at depth that opened at
// offset open, and returns it as an opaque value.
func (p *parser) skip(open int64, depth int) (*value, error) {
	for level := 1; level > 0; {
		tok, _, err := p.token()
		if err != nil {
			return nil, err
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			if level++; depth+level > maxDepth {
				return nil, errors.New("nested too deep")
			}
		case json.Delim(']'), json.Delim('}'):
			level--
		}
	}
	return &value{kind: opaque, raw: p.b[open:p.end]}, nil
}

// get returns member name of an object, or nil.
func (v *value) get(name string) *value {
	if v == nil || v.kind != '{' {
		return nil
	}
	for _, m := range v.members {
		if m.name == name {
			return m.val
		}
	}
	return nil
}

// stringAt returns the string at the path of member names, or "".
func (v *value) stringAt(path ...string) string {
	for _, name := range path {
		v = v.get(name)
	}
	if v == nil || v.kind != '"' {
		return ""
	}
	return v.str
}

// setString makes v the string s.
func (v *value) setString(s string) {
	b, _ := json.Marshal(s) // Safe: a string always encodes.
	*v = value{kind: '"', raw: b, str: s}
}

// append appends v's JSON text to dst.
func (v *value) append(dst []byte) []byte {
	switch v.kind {
	case '{':
		dst = append(dst, '{')
		for i, m := range v.members {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(append(dst, m.rawName...), ':')
			dst = m.val.append(dst)
		}
		return append(dst, '}')
	case '[':
		dst = append(dst, '[')
		for i, e := range v.elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = e.append(dst)
		}
		return append(dst, ']')
	}
	return append(dst, v.raw...)
}

// String returns v's JSON text, cut to 80 bytes, for reports.
func (v *value) String() string {
	if v == nil {
		return "nothing"
	}
	return cut(string(v.append(nil)), 80)
}

// cut shortens s to about n bytes.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && s[i]&0xC0 == 0x80 { // not inside a character
		i--
	}
	return s[:i] + "…"
}

// differ compares values of the transcript with values a client sent.
type differ struct {
	// want maps a string of the transcript to the string the client is
	// expected to send in its place.
	want func(string) string
	// skip reports whether the member at path is not compared.
	skip func(path string) bool
}

// diff describes the first difference between want (the transcript's) and
// got (the client's) at path, or returns "". Members may come in any
// order; numbers compare by value.
func (d differ) diff(path string, want, got *value) string {
	at := func(format string, args ...any) string {
		if path == "" {
			return fmt.Sprintf(format, args...)
		}
		return path + ": " + fmt.Sprintf(format, args...)
	}
	if want.kind == opaque || got.kind == opaque {
		if !sameText(want, got) {
			return at("want %s, got %s (compared as text: over %d JSON values)", want, got, maxValues)
		}
		return ""
	}
	if want.kind != got.kind {
		return at("want %s, got %s", want, got)
	}
	switch want.kind {
	case '{':
		for _, m := range want.members {
			p := join(path, m.name)
			if d.skip != nil && d.skip(p) {
				continue
			}
			g := got.get(m.name)
			if g == nil {
				return p + ": missing (want " + m.val.String() + ")"
			}
			if s := d.diff(p, m.val, g); s != "" {
				return s
			}
		}
		for _, m := range got.members {
			p := join(path, m.name)
			if want.get(m.name) == nil && (d.skip == nil || !d.skip(p)) {
				return p + ": not in the transcript (got " + m.val.String() + ")"
			}
		}
	case '[':
		if len(want.elems) != len(got.elems) {
			return at("want %d elements, got %d: want %s, got %s", len(want.elems), len(got.elems), want, got)
		}
		for i := range want.elems {
			if s := d.diff(path+"["+strconv.Itoa(i)+"]", want.elems[i], got.elems[i]); s != "" {
				return s
			}
		}
	case '"':
		w := want.str
		if d.want != nil {
			w = d.want(w)
		}
		if w != got.str {
			return at("want %s, got %s", quote(w), got)
		}
	default:
		if !sameScalar(want.raw, got.raw) {
			return at("want %s, got %s", want, got)
		}
	}
	return ""
}

// sameText reports whether a and b are the same JSON text, white space
// between tokens aside.
func sameText(a, b *value) bool {
	var x, y bytes.Buffer
	return json.Compact(&x, a.append(nil)) == nil && json.Compact(&y, b.append(nil)) == nil && bytes.Equal(x.Bytes(), y.Bytes())
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func quote(s string) string {
	b, _ := json.Marshal(s) // Safe: a string always encodes.
	return cut(string(b), 80)
}

// sameScalar reports whether two numbers, or true, false or null, are the
// same: numbers by value (2, 2.0 and 2e0 are the same; integers exactly,
// others as float64).
func sameScalar(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	if x, err := strconv.ParseInt(string(a), 10, 64); err == nil {
		y, err := strconv.ParseInt(string(b), 10, 64)
		if err == nil {
			return x == y
		}
	}
	x, errx := strconv.ParseFloat(string(a), 64)
	y, erry := strconv.ParseFloat(string(b), 64)
	return errx == nil && erry == nil && x == y
}
