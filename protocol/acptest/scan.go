package acptest

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Decoding a line with encoding/json scans every byte of it with a state
// machine, which is slow for the long base64 strings of terminal output
// (and very slow under the race detector). decodeLine therefore replaces
// every long string value without escapes by a short placeholder before
// decoding, and puts the original strings back into the decoded tree. The
// strings are found with bytes.IndexByte, which is fast.

// elideMin is the length from which a string value is elided.
const elideMin = 256

// placeholderPrefix starts every placeholder string (a NUL cannot appear
// unescaped in JSON, so no real string on the line starts this way).
const placeholderPrefix = "\x00acptest:"

// decoded is a decoded line.
type decoded struct {
	tree    any                        // as encoding/json decodes it into an any, with json.Number
	fields  map[string]json.RawMessage // the object's raw members, as subslices of the line
	reduced []byte                     // the line with its long strings elided; nil if none were
}

// decodeLine decodes a line. fields is nil when the line is not an object.
func decodeLine(line []byte) (decoded, error) {
	reduced, long := elide(line)
	tree, err := jsonschema.UnmarshalJSON(bytes.NewReader(reduced))
	if err != nil {
		return decoded{}, err
	}
	d := decoded{tree: tree}
	if len(long) > 0 {
		d.tree, d.reduced = restore(tree, long), reduced
	}
	if _, ok := tree.(map[string]any); ok {
		d.fields = splitObject(line)
	}
	return d, nil
}

// elide returns line with its long escape-free string values replaced by
// placeholders, and the replaced strings' contents by placeholder number.
// Only strings of printable ASCII are elided.
// When nothing is long it returns line itself.
func elide(line []byte) ([]byte, [][]byte) {
	var out []byte
	var long [][]byte
	last := 0 // end of the part of line already copied to out
	for i := 0; i < len(line); {
		q := bytes.IndexByte(line[i:], '"')
		if q < 0 {
			break
		}
		start := i + q
		end := stringEnd(line, start)
		if end < 0 {
			break // unterminated: leave it to the decoder
		}
		content := line[start+1 : end]
		if len(content) >= elideMin && plainASCII(content) && isValue(line, end+1) {
			out = append(out, line[last:start]...)
			out = append(out, `"\u0000acptest:`...) // placeholderPrefix, JSON-escaped
			out = strconv.AppendInt(out, int64(len(long)), 10)
			out = append(out, '"')
			long = append(long, content)
			last = end + 1
		}
		i = end + 1
	}
	if long == nil {
		return line, nil
	}
	return append(out, line[last:]...), long
}

// plainASCII reports whether a string's content decodes to itself: it is
// printable ASCII without escapes. (Control characters are invalid, and
// encoding/json replaces invalid UTF-8, so only such strings can be elided.)
func plainASCII(content []byte) bool {
	for _, c := range content {
		if c < 0x20 || c >= 0x80 || c == '\\' {
			return false
		}
	}
	return true
}

// stringEnd returns the index of the quote that closes the string starting
// at line[start], or -1.
func stringEnd(line []byte, start int) int {
	for i := start + 1; i < len(line); {
		q := bytes.IndexByte(line[i:], '"')
		if q < 0 {
			return -1
		}
		end := i + q
		backslashes := 0
		for j := end - 1; j > start && line[j] == '\\'; j-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return end
		}
		i = end + 1
	}
	return -1
}

// isValue reports whether the string ending before line[i] is a value
// rather than an object key: the next non-space byte is not a colon.
func isValue(line []byte, i int) bool {
	for ; i < len(line); i++ {
		switch line[i] {
		case ' ', '\t', '\r', '\n':
		case ':':
			return false
		default:
			return true
		}
	}
	return true
}

// restore puts the elided strings back into a decoded tree.
func restore(v any, long [][]byte) any {
	switch x := v.(type) {
	case string:
		if n, ok := strings.CutPrefix(x, placeholderPrefix); ok {
			if i, err := strconv.Atoi(n); err == nil && i < len(long) {
				return string(long[i])
			}
		}
	case map[string]any:
		for k, e := range x {
			x[k] = restore(e, long)
		}
	case []any:
		for i, e := range x {
			x[i] = restore(e, long)
		}
	}
	return v
}

// splitObject returns the raw top-level members of the JSON object in line,
// which must be valid JSON, as subslices of line (sharing its memory).
func splitObject(line []byte) map[string]json.RawMessage {
	fields := make(map[string]json.RawMessage)
	i := skipSpace(line, 0) + 1 // past '{'
	for {
		i = skipSpace(line, i)
		if i >= len(line) || line[i] != '"' {
			return fields // '}' or the end
		}
		end := stringEnd(line, i)
		var key string
		if json.Unmarshal(line[i:end+1], &key) != nil {
			return fields
		}
		i = skipSpace(line, end+1) + 1 // past ':'
		i = skipSpace(line, i)
		vend := skipValue(line, i)
		fields[key] = json.RawMessage(line[i:vend:vend])
		i = skipSpace(line, vend)
		if i < len(line) && line[i] == ',' {
			i++
		}
	}
}

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(line []byte, i int) int {
	for i < len(line) && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r' || line[i] == '\n') {
		i++
	}
	return i
}

// skipValue returns the index just past the valid JSON value at line[i].
func skipValue(line []byte, i int) int {
	depth := 0
	for i < len(line) {
		switch c := line[i]; c {
		case '"':
			end := stringEnd(line, i)
			if end < 0 {
				return len(line)
			}
			i = end + 1
		case '{', '[':
			depth++
			i++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			i++
		case ',':
			if depth == 0 {
				return i
			}
			i++
		case ' ', '\t', '\r', '\n':
			if depth == 0 {
				return i
			}
			i++
		default:
			i++
		}
		if depth == 0 && i > 0 && (line[i-1] == '"' || line[i-1] == '}' || line[i-1] == ']') {
			return i
		}
	}
	return i
}
