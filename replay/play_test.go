package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script is a transcript with a client line for each kind of message, the
// golden placeholders, an agent request, and a line that is not JSON.
const script = `{"client":{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"transcript","version":"1"}}}}
{"agent":{"id":1,"result":{"protocolVersion":2,"info":{"name":"shellagent","version":"VERSION"}},"jsonrpc":"2.0"}}
{"client":{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/cwd"}}}
{"agent":{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s"}}}
{"client":{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"ls /cwd/sub /cwdx"}]}}}
{"agent":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"terminal_update","terminalId":"t1","cwd":"/cwd"}}}}
{"agent":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"terminal_output_chunk","terminalId":"t1","data":"L2N3ZA=="}}},"text":"/cwd"}
{"agent":{"id":3,"result":{"messageId":"m"},"jsonrpc":"2.0"}}
{"agent":{"id":"perm_1","jsonrpc":"2.0","method":"session/request_permission","params":{"sessionId":"s","description":"in /cwd."}}}
{"client":{"jsonrpc":"2.0","id":"perm_1","result":{"outcome":{"outcome":"selected","optionId":"allow"}}}}
{"agent":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle"}}}}
{"client":{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}}
{"client":"not json"}
{"agent":{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: not valid JSON"}}}
{"client":{"jsonrpc":"2.0","id":4,"method":"session/list","params":{}}}
{"agent":{"id":4,"result":{"sessions":[{"sessionId":"s","cwd":"/cwd","updatedAt":"TIME"}]},"jsonrpc":"2.0"}}
`

// follow is what a client that follows script sends: its own ids, its own
// name, its own directory, members in another order, a number written
// another way.
var follow = []string{
	`{"jsonrpc":"2.0","id":101,"method":"initialize","params":{"protocolVersion":2.0,"info":{"name":"my client","version":"7"}}}`,
	`{"jsonrpc":"2.0","id":"b","method":"session/new","params":{"cwd":"/home/u/p"}}`,
	`{"method":"session/prompt","params":{"prompt":[{"text":"ls /home/u/p/sub /cwdx","type":"text"}],"sessionId":"s"},"id":103,"jsonrpc":"2.0"}`,
	`{"jsonrpc":"2.0","id":"perm_1","result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`,
	`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`,
	`not json`,
	`{"jsonrpc":"2.0","id":104,"method":"session/list","params":{}}`,
}

// played is what the player sends a client that follows script, with
// times as TIME.
var played = []string{
	`{"id":101,"result":{"protocolVersion":2,"info":{"name":"shellagent","version":"VERSION"}},"jsonrpc":"2.0"}`,
	`{"jsonrpc":"2.0","id":"b","result":{"sessionId":"s"}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"terminal_update","terminalId":"t1","cwd":"/home/u/p"}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"terminal_output_chunk","terminalId":"t1","data":"L2N3ZA=="}}}`,
	`{"id":103,"result":{"messageId":"m"},"jsonrpc":"2.0"}`,
	`{"id":"perm_1","jsonrpc":"2.0","method":"session/request_permission","params":{"sessionId":"s","description":"in /home/u/p."}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle"}}}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: not valid JSON"}}`,
	`{"id":104,"result":{"sessions":[{"sessionId":"s","cwd":"/home/u/p","updatedAt":"TIME"}]},"jsonrpc":"2.0"}`,
}

// edit returns follow with line i (from 0) replaced by the lines given
// (none: removed).
func edit(i int, lines ...string) []string {
	return slices.Concat(follow[:i], lines, follow[i+1:])
}

// until returns follow up to line i (from 0), then the lines given: a
// client that stops after departing.
func until(i int, lines ...string) []string {
	return slices.Concat(follow[:i], lines)
}

func TestPlay(t *testing.T) {
	t.Parallel()
	prompt := follow[2]
	never := []string{
		"line 5: never sent: a session/prompt request",
		"line 10: never sent: a response to request \"perm_1\"",
		"line 12: never sent: a session/cancel notification",
		`line 13: never sent: a line that is not JSON: "not json"`,
		"line 15: never sent: a session/list request",
	}
	tests := []struct {
		name    string
		client  []string
		maxLine int
		want    []string // departures
		sent    []string // lines the player must have sent, in order, among others
	}{
		{name: "followed", client: follow},
		{
			name:   "another method",
			client: until(2, `{"jsonrpc":"2.0","id":9,"method":"terminal/cancel","params":{}}`),
			want:   append([]string{"line 5: want a session/prompt request, got a terminal/cancel request"}, never...),
			sent:   []string{`{"jsonrpc":"2.0","id":9,"error":{"code":-32603,"message":"replay: a terminal/cancel request is not in the transcript here: line 5 of the transcript is a session/prompt request"}}`},
		},
		{
			name:   "different params",
			client: edit(2, strings.Replace(prompt, "ls /home/u/p/sub", "ls /tmp/sub", 1)),
			want:   []string{`line 5: a session/prompt request differs: params.prompt[0].text: want "ls /home/u/p/sub /cwdx", got "ls /tmp/sub /cwdx"`},
			sent:   played,
		},
		{
			name:   "a member missing",
			client: edit(4, `{"jsonrpc":"2.0","method":"session/cancel","params":{}}`),
			want:   []string{`line 12: a session/cancel notification differs: params.sessionId: missing (want "s")`},
		},
		{
			name:   "a member more",
			client: edit(6, `{"jsonrpc":"2.0","id":104,"method":"session/list","params":{"cwd":"/home/u/p"}}`),
			want:   []string{`line 15: a session/list request differs: params.cwd: not in the transcript (got "/home/u/p")`},
		},
		{
			name:   "an extra request",
			client: edit(2, `{"jsonrpc":"2.0","id":9,"method":"session/list","params":{}}`, prompt),
			want:   []string{"line 5: want a session/prompt request, got a session/list request"},
			sent:   slices.Concat(played[:2], []string{`{"jsonrpc":"2.0","id":9,"error":{"code":-32603,"message":"replay: a session/list request is not in the transcript here: line 5 of the transcript is a session/prompt request"}}`}, played[2:]),
		},
		{
			name:   "another answer to the agent's request",
			client: edit(3, `{"jsonrpc":"2.0","id":"perm_1","result":{"outcome":{"outcome":"cancelled"}}}`),
			sent:   played,
			want:   []string{`line 10: a response to request "perm_1" differs: result.outcome.outcome: want "selected", got "cancelled"`},
		},
		{
			name:   "an answer to another request",
			client: until(3, `{"jsonrpc":"2.0","id":"perm_2","result":{}}`),
			want:   append([]string{`line 10: want a response to request "perm_1", got a response to request "perm_2"`}, never[1:]...),
		},
		{
			name:   "stops early",
			client: follow[:2],
			want:   never,
			sent:   played[:2],
		},
		{
			name:   "after the end",
			client: append(slices.Clone(follow), `{"jsonrpc":"2.0","id":105,"method":"session/list","params":{}}`),
			want:   []string{"line 16: a session/list request, after the transcript's last line"},
			sent:   append(slices.Clone(played), `{"jsonrpc":"2.0","id":105,"error":{"code":-32603,"message":"replay: a session/list request is not in the transcript here: the transcript has ended"}}`),
		},
		{
			name:   "not JSON in a request's place",
			client: until(2, `{"jsonrpc":"2.0",`),
			want:   append([]string{`line 5: want a session/prompt request, got a line that is not JSON: "{\"jsonrpc\":\"2.0\","`}, never...),
			sent:   []string{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: not valid JSON"}}`},
		},
		{
			name:   "other text in the place of text that is not JSON",
			client: edit(5, `still not json`),
			want:   []string{`line 13: a line that is not JSON: "not json" differs: want "not json", got "still not json"`},
			sent:   played,
		},
		{
			name:   "a batch",
			client: until(2, `[1,2]`),
			want:   append([]string{"line 5: want a session/prompt request, got JSON that is not a JSON-RPC message: [1,2]"}, never...),
			sent:   []string{`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch requests are not supported"}}`},
		},
		{
			name:    "a line over the cap",
			client:  edit(2, `{"jsonrpc":"2.0","id":9,"method":"x","params":"`+strings.Repeat("x", 400)+`"}`, prompt),
			maxLine: 300,
			want:    []string{"line 5: a line longer than the agent accepts"},
			sent:    slices.Concat(played[:2], []string{`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"message longer than 300 bytes"}}`}, played[2:]),
		},
	}
	tr, err := Read(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			var reported []string
			in := strings.NewReader(strings.Join(tt.client, "\n") + "\n")
			deps, err := Play(context.Background(), tr, in, &out, Options{MaxLine: tt.maxLine, Report: func(d Departure) { reported = append(reported, d.String()) }})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range deps {
				got = append(got, d.String())
			}
			if !slices.Equal(got, tt.want) || !slices.Equal(reported, tt.want) {
				t.Errorf("departures\n%s\nreported\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(reported, "\n"), strings.Join(tt.want, "\n"))
			}
			lines := sentLines(t, out.Bytes())
			want := tt.sent
			if tt.want == nil {
				want = played
			}
			if want != nil && !isSubsequence(want, lines) {
				t.Errorf("sent\n%s\nwant, in this order\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// timePattern matches the time that replaces TIME.
var timePattern = regexp.MustCompile(`"updatedAt":"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)"`)

// sentLines splits what the player sent into lines, with times as TIME.
func sentLines(t *testing.T, out []byte) []string {
	t.Helper()
	var lines []string
	for _, l := range strings.SplitAfter(string(out), "\n") {
		if l == "" {
			continue
		}
		if !strings.HasSuffix(l, "\n") {
			t.Errorf("a line without a newline: %q", l)
		}
		l = strings.TrimSuffix(l, "\n")
		if m := timePattern.FindStringSubmatch(l); m != nil {
			if _, err := time.Parse(time.RFC3339Nano, m[1]); err != nil {
				t.Errorf("updatedAt %s: %v", m[1], err)
			}
			l = timePattern.ReplaceAllString(l, `"updatedAt":"TIME"`)
		}
		lines = append(lines, l)
	}
	return lines
}

// isSubsequence reports whether want appears in got in order.
func isSubsequence(want, got []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// TestPlaySendsAtTheirPlace: the agent lines that follow a client line go
// out once the client has sent it, not before.
func TestPlaySendsAtTheirPlace(t *testing.T) {
	t.Parallel()
	tr, err := Read(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := Play(context.Background(), tr, inR, outW, Options{})
		outW.Close()
		done <- err
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		b := make([]byte, 64<<10)
		var buf []byte
		for {
			n, err := outR.Read(b)
			buf = append(buf, b[:n]...)
			for {
				i := bytes.IndexByte(buf, '\n')
				if i < 0 {
					break
				}
				lines <- string(buf[:i])
				buf = buf[i+1:]
			}
			if err != nil {
				return
			}
		}
	}()
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-lines:
			if got != want {
				t.Fatalf("got %s, want %s", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("nothing sent; want %s", want)
		}
	}
	quiet := func() {
		t.Helper()
		select {
		case got := <-lines:
			t.Fatalf("sent before its place: %s", got)
		case <-time.After(50 * time.Millisecond):
		}
	}
	quiet()
	io.WriteString(inW, follow[0]+"\n")
	expect(played[0])
	quiet()
	io.WriteString(inW, follow[1]+"\n")
	expect(played[1])
	quiet()
	inW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
}

// TestPlayClientNotReading: a client that ends its input and reads nothing
// does not hold Play for longer than the flush timeout.
func TestPlayClientNotReading(t *testing.T) {
	t.Parallel()
	tr, err := Read(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	outR, outW := io.Pipe() // never read until the end
	start := time.Now()
	_, err = Play(context.Background(), tr, strings.NewReader(strings.Join(follow, "\n")), outW, Options{FlushTimeout: 100 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "not reading") || time.Since(start) > 5*time.Second {
		t.Errorf("Play returned %v after %v", err, time.Since(start))
	}
	outR.Close() // ends the blocked write, and the goroutine
}

// TestPlayBrokenOutput: a failed write ends the replay with its error.
func TestPlayBrokenOutput(t *testing.T) {
	t.Parallel()
	tr, err := Read(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	outR, outW := io.Pipe()
	outR.Close()
	_, err = Play(context.Background(), tr, strings.NewReader(strings.Join(follow, "\n")), outW, Options{})
	if err == nil || !strings.Contains(err.Error(), "closed pipe") {
		t.Errorf("Play returned %v", err)
	}
}

func TestRead(t *testing.T) {
	tests := []struct {
		name, text string
		want       []Line
		err        string
	}{
		{"both sides", "{\"client\":{\"a\":1}}\n\n{\"agent\":[1],\"text\":\"x\"}\n", []Line{{1, Client, []byte(`{"a":1}`)}, {3, Agent, []byte(`[1]`)}}, ""},
		{"a line that was not JSON", `{"client":"not {json"}`, []Line{{1, Client, []byte(`not {json`)}}, ""},
		{"a JSON string sent as it is", `{"client":"\"quoted\""}`, []Line{{1, Client, []byte(`"\"quoted\""`)}}, ""},
		{"no side", `{"text":"x"}`, nil, `1: want {"client":MSG} or {"agent":MSG}`},
		{"two sides", "\n" + `{"client":1,"agent":2}`, nil, `2: want {"client":MSG} or {"agent":MSG}`},
		{"not an object", `[1]`, nil, `1: want {"client":MSG} or {"agent":MSG}: json: cannot unmarshal`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := Read(strings.NewReader(tt.text))
			if tt.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
					t.Fatalf("err %v, want %s…", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(tr.Lines, tt.want, func(a, b Line) bool { return a.Num == b.Num && a.From == b.From && bytes.Equal(a.Msg, b.Msg) }) {
				t.Errorf("lines %+v, want %+v", tr.Lines, tt.want)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	tests := []struct {
		name, want, got, diff string
	}{
		{"equal", `{"a":[1,"x",true,null]}`, `{"a":[1,"x",true,null]}`, ""},
		{"member order", `{"a":1,"b":2}`, `{ "b" : 2, "a" : 1 }`, ""},
		{"numbers by value", `[2,1.5,100]`, `[2.0,15e-1,1e2]`, ""},
		{"large integers exactly", `9007199254740993`, `9007199254740992`, "want 9007199254740993, got 9007199254740992"},
		{"another string", `{"a":{"b":"x"}}`, `{"a":{"b":"y"}}`, `a.b: want "x", got "y"`},
		{"another type", `{"a":"1"}`, `{"a":1}`, `a: want "1", got 1`},
		{"array length", `{"a":[1]}`, `{"a":[1,2]}`, "a: want 1 elements, got 2: want [1], got [1,2]"},
		{"array element", `[{"t":"a"},{"t":"b"}]`, `[{"t":"a"},{"t":"c"}]`, `[1].t: want "b", got "c"`},
		{"missing", `{"a":1,"b":2}`, `{"a":1}`, "b: missing (want 2)"},
		{"extra", `{"a":1}`, `{"a":1,"c":3}`, "c: not in the transcript (got 3)"},
		{"skipped", `{"id":1,"x":1}`, `{"id":2,"x":1}`, ""},
		{"placeholder", `{"s":"/cwd/a"}`, `{"s":"/home/a"}`, ""},
	}
	d := differ{
		want: func(s string) string { return strings.ReplaceAll(s, "/cwd", "/home") },
		skip: func(path string) bool { return path == "id" },
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := parseValue([]byte(tt.want))
			if err != nil {
				t.Fatal(err)
			}
			g, err := parseValue([]byte(tt.got))
			if err != nil {
				t.Fatal(err)
			}
			if got := d.diff("", w, g); got != tt.diff {
				t.Errorf("diff %q, want %q", got, tt.diff)
			}
		})
	}
}

// TestValueRoundTrip: a value written back is the text it was read from,
// white space between tokens aside; strings and numbers keep their
// escapes and forms.
func TestValueRoundTrip(t *testing.T) {
	for _, text := range []string{
		`{"a":"sleep 30 \u0026","b":[1.50,-0,1e3,true,false,null],"c":{},"d":[],"\u00e9":"é"}`,
		`"just a string"`,
		`12`,
	} {
		v, err := parseValue([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(v.append(nil)); got != text {
			t.Errorf("%s written back as %s", text, got)
		}
	}
	spaced := `{ "a" : [ 1 , 2 ] }`
	if v, err := parseValue([]byte(spaced)); err != nil || string(v.append(nil)) != `{"a":[1,2]}` {
		t.Errorf("%s: %v", spaced, err)
	}
	for _, bad := range []string{`{"a":1} {"b":2}`, `{"a":`, ``, strings.Repeat("[", 20000) + strings.Repeat("]", 20000)} {
		if _, err := parseValue([]byte(bad)); err == nil {
			t.Errorf("%.20s parsed", bad)
		}
	}
}

// TestPlayCancelled: when ctx ends, Play returns without waiting for the
// client's input to end, with the lines never sent.
func TestPlayCancelled(t *testing.T) {
	t.Parallel()
	tr, err := Read(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	defer inW.Close() // ends the read under way
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		io.WriteString(inW, follow[0]+"\n")
		cancel()
	}()
	var out bytes.Buffer
	deps, err := Play(ctx, tr, inR, &out, Options{})
	if err != nil || len(deps) == 0 || deps[len(deps)-1].Line != 15 {
		t.Errorf("Play returned %v, %v", deps, err)
	}
}

// FuzzPlay: whatever the client sends, Play returns, and every line it
// writes is JSON (the transcript's lines, its answers, the agent's
// refusals).
func FuzzPlay(f *testing.F) {
	f.Add([]byte(strings.Join(follow, "\n")))
	f.Add([]byte(strings.Join(until(2, `[1,2]`, `{"jsonrpc":"1.0","id":{},"method":"x"}`, "\x00\xff"), "\r\n")))
	f.Add([]byte(`{"jsonrpc":"2.0","id":-1,"method":"initialize","params":{"protocolVersion":2}}` + "\n" + `{"id":"perm_1","result":null}`))
	tr, err := Read(strings.NewReader(script))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		if _, err := Play(context.Background(), tr, bytes.NewReader(in), &out, Options{MaxLine: 1 << 10}); err != nil {
			t.Fatal(err)
		}
		for _, l := range sentLines(t, out.Bytes()) {
			if !json.Valid([]byte(l)) {
				t.Errorf("sent a line that is not JSON: %q", l)
			}
		}
	})
}
