package stack

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"shellagent/internal/waitfor"
)

// serviceKeys are the keys a service's table may have. They match
// exactly, as TOML's keys do (go-toml's decoder into a struct would also
// take "Command" for command); serviceOf checks each value as go-toml
// decodes it (any), so that a wrong type is refused in the file's words,
// not Go's.
var serviceKeys = []string{
	"command", "cwd", "env", "depends_on", "ready", "ready_timeout",
	"restart", "max_restarts", "backoff", "ports", "log",
}

// parseTOML fills st.Services from a shellagent.toml, in the file's
// order. Its tables are checked key by key in that order, so that a file
// with several faults is refused for the same one every time, whatever
// the order of Go's maps.
func (st *Stack) parseTOML(data []byte) error {
	if tomlItems(data) > maxItems {
		return st.refuse(0, "more than %d keys, tables and array items: a stack file is a few KB written by hand, so this one is not read", maxItems)
	}
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		return st.decodeError(err)
	}
	lines, err := keyLines(data)
	if err != nil {
		return st.decodeError(err) // Unmarshal accepted what the parser refuses: not expected.
	}
	for _, key := range lines.inOrder(doc) {
		if key != "services" {
			return st.refuse(lines.at(key), "unknown key %q", key)
		}
	}
	if doc["services"] == nil {
		return nil
	}
	services, ok := doc["services"].(map[string]any)
	if !ok {
		return st.refuse(lines.at("services"), "services: want a table")
	}
	for _, name := range lines.inOrder(services, "services") {
		if len(st.Services) == maxServices {
			return st.refuse(lines.at("services", name), "services.%s: more than %d services: a stack file is a few KB written by hand, so this one is not read", tomlKey(name), maxServices)
		}
		t, err := st.serviceTable(name, services[name], lines)
		if err != nil {
			return err
		}
		s, err := st.serviceOf(name, t, lines)
		if err != nil {
			return err
		}
		st.add(s)
	}
	return nil
}

// maxItems bounds the keys, tables and array items of a shellagent.toml,
// as tomlItems counts them, checked before go-toml reads it: its check of
// repeated keys takes time in the square of their number (a 1 MiB file of
// env keys took 26 s), and the file is read on the session's actor. A
// hand-written stack file has a few hundred (about 30 for a service with
// every key, eight env entries and two dependencies); a file at this
// bound is read in 70 ms on a loaded machine, one of twice as many in
// 250 ms.
const maxItems = 4096

// tomlItems counts what go-toml's reading of data may take time for: each
// '=' (a key's value), '[' (a table, an array), ',' (an item) and '.' (a
// dotted key's part, a float) outside strings and comments. It is a cheap
// upper bound on the keys, tables and array items of the document, which
// it need not be valid: go-toml refuses it afterwards if it is not. It
// stops counting past maxItems.
func tomlItems(data []byte) int {
	n := 0
	for i := 0; i < len(data) && n <= maxItems; i++ {
		switch c := data[i]; c {
		case '=', '[', ',', '.':
			n++
		case '#':
			i = skipLine(data, i)
		case '"', '\'':
			i = skipString(data, i)
		}
	}
	return n
}

// skipLine returns the offset of the end of the line at i: its newline,
// or the end of data.
func skipLine(data []byte, i int) int {
	if j := bytes.IndexByte(data[i:], '\n'); j >= 0 {
		return i + j
	}
	return len(data)
}

// skipString returns the offset of the last byte of the TOML string that
// starts at i with a quote: basic ("…", escapes), literal ('…'), or
// multiline (three quotes of either kind, and up to two more at its
// end). A one-line string ends at its line's end at the latest, an
// unclosed multiline one at the end of data.
func skipString(data []byte, i int) int {
	q := data[i]
	if bytes.HasPrefix(data[i:], []byte{q, q, q}) {
		for j := i + 3; j < len(data); j++ {
			switch {
			case q == '"' && data[j] == '\\':
				j++
			case bytes.HasPrefix(data[j:], []byte{q, q, q}):
				// Up to two more quotes are the string's ("""a""""").
				for k := 0; k < 2 && j+3 < len(data) && data[j+3] == q; k++ {
					j++
				}
				return j + 2
			}
		}
		return len(data)
	}
	for j := i + 1; j < len(data); j++ {
		switch {
		case data[j] == '\n':
			return j
		case q == '"' && data[j] == '\\' && j+1 < len(data) && data[j+1] != '\n':
			j++
		case data[j] == q:
			return j
		}
	}
	return len(data)
}

// serviceTable checks that v, services.NAME, is a table of serviceKeys,
// and returns it.
func (st *Stack) serviceTable(name string, v any, lines lineIndex) (map[string]any, error) {
	t, ok := v.(map[string]any)
	if !ok {
		return nil, st.refuse(lines.at("services", name), "services.%s: want a table", tomlKey(name))
	}
	for _, key := range lines.inOrder(t, "services", name) {
		if !slices.Contains(serviceKeys, key) {
			return nil, st.refuse(lines.at("services", name, key), "services.%s: unknown key %q", tomlKey(name), key)
		}
	}
	return t, nil
}

// decodeError turns go-toml's errors into an *Error at their line.
func (st *Stack) decodeError(err error) error {
	if de, ok := errors.AsType[*toml.DecodeError](err); ok {
		line, _ := de.Position()
		return st.refuse(line, "%s", strings.TrimPrefix(de.Error(), "toml: "))
	}
	return st.refuse(0, "%s", strings.TrimPrefix(err.Error(), "toml: "))
}

// tomlKey writes one key as TOML does: bare if it can be, else quoted.
func tomlKey(key string) string {
	if key != "" && strings.Trim(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == "" {
		return key
	}
	return strconv.Quote(key)
}

// joinKey writes a key path as dotted TOML, each key as tomlKey writes
// it (env."A=B").
func joinKey(key []string) string {
	quoted := make([]string, len(key))
	for i, k := range key {
		quoted[i] = tomlKey(k)
	}
	return strings.Join(quoted, ".")
}

// lineIndex maps a key path (joined by NUL) and each of its prefixes to the
// line where it first appears.
type lineIndex map[string]int

// at returns the line of the key path, or of its longest prefix that has
// one (a key inside an inline table), or 0.
func (ix lineIndex) at(key ...string) int {
	for n := len(key); n > 0; n-- {
		if l, ok := ix[strings.Join(key[:n], "\x00")]; ok {
			return l
		}
	}
	return 0
}

// inOrder returns the keys of t, the table at key path in, in the order
// of their lines (then by name).
func (ix lineIndex) inOrder(t map[string]any, in ...string) []string {
	line := func(key string) int { return ix.at(append(in[:len(in):len(in)], key)...) }
	keys := slices.Collect(maps.Keys(t))
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(line(a), line(b)), strings.Compare(a, b))
	})
	return keys
}

// keyDepth is the depth of the deepest key path a lineIndex is asked
// about: services.NAME.env.VAR.
const keyDepth = 4

// keyLines indexes the line of every key of the document, with go-toml's
// parser (its unstable package: the decoder tells no positions but its
// errors'), down to keyDepth: a deeper key is refused at the line of its
// prefix of that depth, and a long dotted key takes no more time than its
// length.
func keyLines(data []byte) (lineIndex, error) {
	ix := lineIndex{}
	var p unstable.Parser
	p.Reset(data)
	lines := lineCounter{data: data, line: 1}
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		var key []string
		if e.Kind == unstable.KeyValue {
			key = slices.Clone(table)
		}
		line := 0
		for it := e.Key(); it.Next(); {
			n := it.Node()
			if line == 0 {
				line = lines.at(int(n.Raw.Offset))
			}
			if len(key) < keyDepth {
				key = append(key, string(n.Data))
			}
		}
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = key
		case unstable.KeyValue:
		default:
			continue
		}
		for n := 1; n <= len(key); n++ {
			k := strings.Join(key[:n], "\x00")
			if _, ok := ix[k]; !ok {
				ix[k] = line
			}
		}
	}
	return ix, p.Error()
}

// lineCounter tells the line of an offset of data. Asked in the order of
// the document, it takes time in proportion to the document, where the
// parser's Shape scans from its start each time.
type lineCounter struct {
	data []byte
	off  int // the last offset asked
	line int // its line
}

func (c *lineCounter) at(off int) int {
	if off < c.off {
		c.off, c.line = 0, 1
	}
	c.line += bytes.Count(c.data[c.off:off], []byte("\n"))
	c.off = off
	return c.line
}

// serviceOf checks one decoded service and fills in its defaults.
func (st *Stack) serviceOf(name string, t map[string]any, ix lineIndex) (*Service, error) {
	s := &Service{
		Name:         name,
		Dir:          st.Dir,
		ReadyTimeout: DefaultReadyTimeout,
		Restart:      RestartNo,
		MaxRestarts:  DefaultMaxRestarts,
		Backoff:      DefaultBackoff,
		Line:         ix.at("services", name),
	}
	s.dependsLine = s.Line
	if !validName(name) {
		return nil, st.refuse(s.Line, "services.%q: a service's name is letters, digits, '_', '-' and '.' (not first), at most 64", name)
	}
	k := keyChecker{st: st, ix: ix, service: name}
	var err error
	if t["command"] == nil {
		return nil, st.refuse(s.Line, "services.%s: no command", name)
	}
	if s.Command, err = k.text("command", t["command"]); err != nil {
		return nil, err
	}
	if strings.TrimSpace(s.Command) == "" {
		return nil, k.refuse("command", "empty")
	}
	if t["cwd"] != nil {
		cwd, err := k.text("cwd", t["cwd"])
		if err != nil {
			return nil, err
		}
		if !filepath.IsAbs(cwd) {
			cwd = filepath.Join(st.Dir, cwd)
		}
		s.Dir = filepath.Clean(cwd)
	}
	if t["env"] != nil {
		if s.Env, err = k.env(t["env"]); err != nil {
			return nil, err
		}
	}
	if t["depends_on"] != nil {
		s.dependsLine = ix.at("services", name, "depends_on")
		if s.DependsOn, err = k.names(t["depends_on"]); err != nil {
			return nil, err
		}
	}
	if t["ready"] != nil {
		if s.Ready, err = k.ready(t["ready"]); err != nil {
			return nil, err
		}
	}
	if t["ready_timeout"] != nil {
		if s.ReadyTimeout, err = k.duration("ready_timeout", t["ready_timeout"]); err != nil {
			return nil, err
		}
		if s.ReadyTimeout == 0 {
			return nil, k.refuse("ready_timeout", "must be more than 0")
		}
	}
	if t["restart"] != nil {
		r, err := k.text("restart", t["restart"])
		if err != nil {
			return nil, err
		}
		s.Restart = Restart(r)
		if s.Restart != RestartNo && s.Restart != RestartOnFailure && s.Restart != RestartAlways {
			return nil, k.refuse("restart", "%q is not no, on-failure or always", r)
		}
	}
	if t["max_restarts"] != nil {
		if s.MaxRestarts, err = k.count("max_restarts", t["max_restarts"]); err != nil {
			return nil, err
		}
	}
	if t["backoff"] != nil {
		if s.Backoff, err = k.duration("backoff", t["backoff"]); err != nil {
			return nil, err
		}
	}
	if t["ports"] != nil {
		if s.Ports, err = k.ports(t["ports"]); err != nil {
			return nil, err
		}
	}
	if t["log"] != nil {
		b, ok := t["log"].(bool)
		if !ok {
			return nil, k.wrongType("log", "true or false", t["log"])
		}
		s.Log = b
	}
	return s, nil
}

// keyChecker checks the values of one service's keys and refuses them at
// their line.
type keyChecker struct {
	st      *Stack
	ix      lineIndex
	service string
}

func (k keyChecker) refuse(key, format string, args ...any) error {
	return k.refuseIn([]string{key}, format, args...)
}

// refuseIn refuses the value of a key below the service's (env.NAME).
func (k keyChecker) refuseIn(key []string, format string, args ...any) error {
	return k.st.refuse(k.ix.at(append([]string{"services", k.service}, key...)...),
		"services.%s.%s: %s", k.service, joinKey(key), fmt.Sprintf(format, args...))
}

func (k keyChecker) wrongType(key, want string, v any) error {
	return k.refuse(key, "want %s, not %s", want, kindOf(v))
}

// kindOf names the TOML type of a decoded value.
func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	default:
		return "a date or time"
	}
}

func (k keyChecker) text(key string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", k.wrongType(key, "a string", v)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "", k.refuse(key, "contains a NUL byte")
	}
	return s, nil
}

// ready reads a ready condition, which waitfor.ParseReady must accept:
// a service's readiness is watched as /wait watches.
func (k keyChecker) ready(v any) (string, error) {
	s, err := k.text("ready", v)
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", k.refuse("ready", "empty: leave it out for ready once started")
	}
	if _, err := waitfor.ParseReady(s); err != nil {
		return "", k.refuse("ready", "%v", err)
	}
	return s, nil
}

func (k keyChecker) count(key string, v any) (int, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, k.wrongType(key, "an integer", v)
	}
	if n < 0 || n > math.MaxInt32 {
		return 0, k.refuse(key, "%d is not a count", n)
	}
	return int(n), nil
}

// duration reads a Go duration string ("500ms", "2s") or a number of
// seconds.
func (k keyChecker) duration(key string, v any) (time.Duration, error) {
	var d time.Duration
	switch v := v.(type) {
	case string:
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, k.refuse(key, "%q is not a duration such as \"500ms\" or \"2s\"", v)
		}
	case int64:
		if v > math.MaxInt64/int64(time.Second) || v < 0 {
			return 0, k.refuse(key, "%d seconds is out of range", v)
		}
		d = time.Duration(v) * time.Second
	case float64:
		if v < 0 || v > float64(math.MaxInt64/int64(time.Second)) || v != v {
			return 0, k.refuse(key, "%v seconds is out of range", v)
		}
		d = time.Duration(v * float64(time.Second))
	default:
		return 0, k.wrongType(key, "a duration (\"2s\") or seconds", v)
	}
	if d < 0 {
		return 0, k.refuse(key, "negative")
	}
	return d, nil
}

func (k keyChecker) env(v any) ([]EnvVar, error) {
	t, ok := v.(map[string]any)
	if !ok {
		return nil, k.wrongType("env", "a table", v)
	}
	env := make([]EnvVar, 0, len(t))
	for _, name := range k.ix.inOrder(t, "services", k.service, "env") {
		val, key := t[name], []string{"env", name}
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return nil, k.refuseIn(key, "not a variable name")
		}
		var s string
		switch val := val.(type) {
		case string:
			s = val
		case int64:
			s = strconv.FormatInt(val, 10)
		case float64:
			s = strconv.FormatFloat(val, 'g', -1, 64)
		case bool:
			s = strconv.FormatBool(val)
		default:
			return nil, k.refuseIn(key, "want a string, number or boolean, not %s", kindOf(val))
		}
		if strings.IndexByte(s, 0) >= 0 {
			return nil, k.refuseIn(key, "contains a NUL byte")
		}
		env = append(env, EnvVar{Key: name, Value: s})
	}
	slices.SortFunc(env, func(a, b EnvVar) int { return strings.Compare(a.Key, b.Key) })
	return env, nil
}

func (k keyChecker) names(v any) ([]string, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, k.wrongType("depends_on", "an array of service names", v)
	}
	var names []string
	for _, e := range a {
		s, ok := e.(string)
		if !ok {
			return nil, k.wrongType("depends_on", "service names", e)
		}
		if !slices.Contains(names, s) {
			names = append(names, s)
		}
	}
	return names, nil
}

func (k keyChecker) ports(v any) ([]int, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, k.wrongType("ports", "an array of port numbers", v)
	}
	var ports []int
	for _, e := range a {
		p, ok := e.(int64)
		if !ok {
			return nil, k.wrongType("ports", "port numbers", e)
		}
		if p < 1 || p > 65535 {
			return nil, k.refuse("ports", "%d is not a port (1 to 65535)", p)
		}
		if !slices.Contains(ports, int(p)) {
			ports = append(ports, int(p))
		}
	}
	return ports, nil
}
