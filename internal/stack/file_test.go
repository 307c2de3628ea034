package stack

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"shellagent/internal/testloop"
)

// project writes the files (name → content) into a new directory and
// returns it.
func project(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// numbered repeats format n times, each with its index.
func numbered(format string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, format, i)
	}
	return b.String()
}

const chain = `# a database, an API on it, a web front on the API
[services.web]
command = "npm run dev"
cwd = "web"
depends_on = ["api"]
ready = "http://localhost:5173/"

[services.db]
command = "postgres -D data"
ready = ":5432"
ports = [5432]
log = true

[services.api]
command = "go run ./cmd/api"
depends_on = ["db"]
ready = ":8080"
ready_timeout = "90s"
restart = "on-failure"
max_restarts = 2
backoff = 2
env = { PORT = 8080, MODE = "dev", DEBUG = true }
`

func TestLoadTOML(t *testing.T) {
	t.Parallel()
	dir := project(t, map[string]string{TOMLFile: chain, Procfile: "ignored: true\n"})
	st, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.File != filepath.Join(dir, TOMLFile) || st.Dir != dir {
		t.Errorf("File, Dir = %q, %q; want the toml in %q", st.File, st.Dir, dir)
	}
	var names []string
	for _, s := range st.Services {
		names = append(names, s.Name)
	}
	if want := []string{"web", "db", "api"}; !reflect.DeepEqual(names, want) {
		t.Errorf("services %v, want the file's order %v", names, want)
	}
	api := st.Service("api")
	want := &Service{
		Name: "api", Command: "go run ./cmd/api", Dir: dir,
		Env:          []EnvVar{{"DEBUG", "true"}, {"MODE", "dev"}, {"PORT", "8080"}},
		DependsOn:    []string{"db"},
		Ready:        ":8080",
		ReadyTimeout: 90 * time.Second,
		Restart:      RestartOnFailure,
		MaxRestarts:  2,
		Backoff:      2 * time.Second,
		Line:         14,
		dependsLine:  16,
	}
	if !reflect.DeepEqual(api, want) {
		t.Errorf("api =\n%+v\nwant\n%+v", api, want)
	}
	if env := api.Environ(); !reflect.DeepEqual(env, []string{"DEBUG=true", "MODE=dev", "PORT=8080"}) {
		t.Errorf("api.Environ() = %q", env)
	}
	db := st.Service("db")
	if db.ReadyTimeout != DefaultReadyTimeout || db.Restart != RestartNo || db.MaxRestarts != DefaultMaxRestarts ||
		db.Backoff != DefaultBackoff || !db.Log || !reflect.DeepEqual(db.Ports, []int{5432}) || db.Env != nil {
		t.Errorf("db = %+v, want the defaults, log and port 5432", db)
	}
	if web := st.Service("web"); web.Dir != filepath.Join(dir, "web") || web.Log {
		t.Errorf("web.Dir = %q, Log %v; want %q relative to the file, no log", web.Dir, web.Log, filepath.Join(dir, "web"))
	}
}

func TestLoadDurations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{
		{`"500ms"`, 500 * time.Millisecond},
		{`"1m30s"`, 90 * time.Second},
		{`3`, 3 * time.Second},
		{`0.25`, 250 * time.Millisecond},
		{`0`, 0},
	} {
		dir := project(t, map[string]string{TOMLFile: "[services.a]\ncommand = \"x\"\nbackoff = " + tc.value + "\n"})
		st, err := Load(dir)
		if err != nil {
			t.Errorf("backoff = %s: %v", tc.value, err)
			continue
		}
		if got := st.Service("a").Backoff; got != tc.want {
			t.Errorf("backoff = %s: %v, want %v", tc.value, got, tc.want)
		}
	}
}

// TestLoadRefuses: each file is refused with its path, the line of the
// fault and the reason, and no Stack.
func TestLoadRefuses(t *testing.T) {
	t.Parallel()
	const head = "[services.db]\ncommand = \"db\"\n\n" // lines 1-3
	for _, tc := range []struct {
		name, file, content string
		line                int
		reason              string
	}{
		{"unknown key", TOMLFile, head + "[services.api]\ncommand = \"api\"\n\ncomand = \"typo\"\n",
			7, `services.api: unknown key "comand"`},
		{"unknown table", TOMLFile, head + "[server]\nport = 1\n", 4, `unknown key "server"`},
		{"unknown top-level key", TOMLFile, "version = 2\n" + head, 1, `unknown key "version"`},
		{"a key in another case", TOMLFile, head + "[services.api]\nCommand = \"api\"\n", 5, `services.api: unknown key "Command"`},
		{"a table in another case", TOMLFile, head + "[Services.api]\ncommand = \"api\"\n", 4, `unknown key "Services"`},
		{"no command", TOMLFile, head + "[services.api]\nready = \":80\"\n", 4, "services.api: no command"},
		{"empty command", TOMLFile, head + "[services.api]\ncommand = \"  \"\n", 5, "services.api.command: empty"},
		{"missing dependency", TOMLFile, head + "[services.api]\ncommand = \"api\"\ndepends_on = [\"dbb\"]\n",
			6, `services.api.depends_on: no service "dbb"`},
		{"cycle", TOMLFile, "[services.a]\ncommand = \"a\"\ndepends_on = [\"b\"]\n[services.b]\ncommand = \"b\"\ndepends_on = [\"c\"]\n[services.c]\ncommand = \"c\"\ndepends_on = [\"a\"]\n",
			3, "services.a.depends_on: cycle a -> b -> c -> a"},
		{"self dependency", TOMLFile, head + "[services.api]\ncommand = \"x\"\n\ndepends_on = [\"db\", \"api\"]\n",
			7, "services.api.depends_on: cycle api -> api"},
		{"bad duration", TOMLFile, head + "[services.api]\ncommand = \"x\"\nbackoff = \"2 seconds\"\n",
			6, `services.api.backoff: "2 seconds" is not a duration`},
		{"negative duration", TOMLFile, head + "[services.api]\ncommand = \"x\"\nbackoff = \"-1s\"\n",
			6, "services.api.backoff: negative"},
		{"zero ready_timeout", TOMLFile, head + "[services.api]\ncommand = \"x\"\nready_timeout = 0\n",
			6, "services.api.ready_timeout: must be more than 0"},
		{"duration of wrong type", TOMLFile, head + "[services.api]\ncommand = \"x\"\nready_timeout = true\n",
			6, "services.api.ready_timeout: want a duration"},
		{"command of wrong type", TOMLFile, head + "[services.api]\ncommand = [\"go\", \"run\"]\n",
			5, "services.api.command: want a string, not an array"},
		{"max_restarts a string", TOMLFile, head + "[services.api]\ncommand = \"x\"\nmax_restarts = \"3\"\n",
			6, "services.api.max_restarts: want an integer, not a string"},
		{"max_restarts negative", TOMLFile, head + "[services.api]\ncommand = \"x\"\nmax_restarts = -1\n",
			6, "services.api.max_restarts: -1 is not a count"},
		{"bad restart", TOMLFile, head + "[services.api]\ncommand = \"x\"\nrestart = \"unless-stopped\"\n",
			6, `services.api.restart: "unless-stopped" is not no, on-failure or always`},
		{"ready a port out of range", TOMLFile, head + "[services.api]\ncommand = \"x\"\nready = \":99999\"\n",
			6, `services.api.ready: :99999 is not a port (1 to 65535`},
		{"ready a bad regular expression", TOMLFile, head + "[services.api]\ncommand = \"x\"\nready = \"(\"\n",
			6, `services.api.ready: "(" is not a regular expression (missing closing )`},
		{"ready a URL without host", TOMLFile, head + "[services.api]\ncommand = \"x\"\nready = \"http:///health\"\n",
			6, `services.api.ready: "http:///health" is not a URL`},
		{"ready a URL's port out of range", TOMLFile, head + "[services.api]\ncommand = \"x\"\nready = \"http://localhost:70000/\"\n",
			6, `services.api.ready: "http://localhost:70000/" is not a URL: its port 70000 is not 1 to 65535`},
		{"ready exec without command", TOMLFile, head + "[services.api]\ncommand = \"x\"\nready = \"exec:  \"\n",
			6, "services.api.ready: exec: needs a command"},
		{"ready below other keys", TOMLFile, head + "[services.api]\ncommand = \"x\"\n\nports = [8080]\nready = \":0\"\nlog = true\n",
			8, "services.api.ready: :0 is not a port"},
		{"ready of a dotted key", TOMLFile, "[services]\napi.command = \"x\"\napi.ready = \":-1\"\n",
			3, "services.api.ready: :-1 is not a port"},
		{"ready in an inline table", TOMLFile, "[services]\napi = { command = \"x\", ready = \"[\" }\n",
			2, `services.api.ready: "[" is not a regular expression`},
		{"port out of range", TOMLFile, head + "[services.api]\ncommand = \"x\"\nports = [8080, 70000]\n",
			6, "services.api.ports: 70000 is not a port"},
		{"port a string", TOMLFile, head + "[services.api]\ncommand = \"x\"\nports = [\"8080\"]\n",
			6, "services.api.ports: want port numbers, not a string"},
		{"log a string", TOMLFile, head + "[services.api]\ncommand = \"x\"\nlog = \"yes\"\n",
			6, "services.api.log: want true or false, not a string"},
		{"env not a table", TOMLFile, head + "[services.api]\ncommand = \"x\"\nenv = [\"A=1\"]\n",
			6, "services.api.env: want a table, not an array"},
		{"env value a table", TOMLFile, head + "[services.api]\ncommand = \"x\"\n[services.api.env]\nA = 1\nB = { c = 2 }\n",
			8, "services.api.env.B: want a string, number or boolean, not a table"},
		{"services not a table", TOMLFile, "services = 3\n", 1, "services: want a table"},
		{"service not a table", TOMLFile, "[services]\napi = \"run\"\n", 2, "services.api: want a table"},
		{"services an array of tables", TOMLFile, "\n[[services]]\ncommand = \"x\"\n", 2, "services: want a table"},
		{"bad name", TOMLFile, head + "[services.\"../etc\"]\ncommand = \"x\"\n", 4, `services."../etc": a service's name`},
		{"syntax", TOMLFile, head + "[services.api]\ncommand = \"x\n", 5, "basic strings cannot have new lines"},
		{"no services", TOMLFile, "# nothing yet\n", 0, "no services"},
		{"procfile without colon", Procfile, "web: npm start\n\nworker npm run worker\n", 3, `want "name: command"`},
		{"procfile without command", Procfile, "web: npm start\nworker:\n", 2, "worker: no command"},
		{"procfile repeated name", Procfile, "# two webs\nweb: a\nweb: b\n", 3, "web: declared again (first on line 2)"},
		{"procfile bad name", Procfile, "my web: a\n", 1, `"my web": a service's name`},
		{"procfile empty", Procfile, "# nothing\n\n", 0, "no services"},
		{"larger than the cap", TOMLFile, head + strings.Repeat("# a comment\n", 30000), 0, "larger than 256 KiB"},
		{"procfile larger than the cap", Procfile, strings.Repeat("# a comment\n", 30000), 0, "larger than 256 KiB"},
		{"too many env keys", TOMLFile, head + "[services.db.env]\n" + numbered("K%d = 1\n", 4100), 0, "more than 4096 keys, tables and array items"},
		{"too many array items on one line", TOMLFile, head + "[services.api]\ncommand = \"x\"\nports = [\"\"\"a\"\"\"\"" + strings.Repeat(", 1", 4100) + "]\n", 0, "more than 4096 keys"},
		{"too many dotted parts", TOMLFile, head + "a" + strings.Repeat(".a", 4100) + " = 1\n", 0, "more than 4096 keys"},
		{"too many services", TOMLFile, numbered("[services.s%d]\ncommand = \"x\"\n", 257), 513, "services.s256: more than 256 services"},
		{"procfile too many services", Procfile, numbered("s%d: x\n", 257), 257, "s256: more than 256 services"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := project(t, map[string]string{tc.file: tc.content})
			st, err := Load(dir)
			if st != nil {
				t.Errorf("Load returned a Stack with %d services beside %v", len(st.Services), err)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Load: %v (%T), want an *Error", err, err)
			}
			if want := filepath.Join(dir, tc.file); e.File != want || e.Line != tc.line || !strings.Contains(e.Reason, tc.reason) {
				t.Errorf("Load: %v\nwant %s:%d: …%s…", err, want, tc.line, tc.reason)
			}
		})
	}
}

// TestLoadRefusesTheSameEnvEveryTime: of several env entries at fault,
// the first in the file (by line, then by name on one line) is refused,
// every time, its name written as TOML writes it. Before, the entries
// were checked in the order of Go's map, so a file was refused for one
// fault or another from one /up to the next, and an empty name read
// "env.: not a variable name".
func TestLoadRefusesTheSameEnvEveryTime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, content string
		line          int
		reason        string
	}{
		{"a table of lines", "[services.api]\ncommand = \"x\"\n[services.api.env]\nA = 1\nZ = [1]\n\"B=C\" = 2\n\"\" = 3\n",
			5, "services.api.env.Z: want a string, number or boolean, not an array"},
		{"an inline table", "[services.api]\ncommand = \"x\"\nenv = { Z = [1], \"B=C\" = 2, \"\" = 3, A = 1 }\n",
			3, `services.api.env."": not a variable name`},
		{"a name with =", "[services.api]\ncommand = \"x\"\nenv = { Z = [1], \"B=C\" = 2, A = 1 }\n",
			3, `services.api.env."B=C": not a variable name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := project(t, map[string]string{TOMLFile: tc.content})
			want := filepath.Join(dir, TOMLFile) + ":" + strconv.Itoa(tc.line) + ": " + tc.reason
			for range 50 {
				if _, err := Load(dir); err == nil || err.Error() != want {
					t.Fatalf("Load: %v\nwant %s", err, want)
				}
			}
		})
	}
}

func TestLoadProcfile(t *testing.T) {
	t.Parallel()
	dir := project(t, map[string]string{Procfile: "# foreman's format\nweb: bundle exec rails s -p $PORT\n\n  worker:bundle exec sidekiq  \nclock: ruby clock.rb # ticks\n"})
	st, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.File != filepath.Join(dir, Procfile) {
		t.Errorf("File = %q, want the Procfile", st.File)
	}
	want := []struct {
		name, command string
		line          int
	}{
		{"web", "bundle exec rails s -p $PORT", 2},
		{"worker", "bundle exec sidekiq", 4},
		{"clock", "ruby clock.rb # ticks", 5},
	}
	if len(st.Services) != len(want) {
		t.Fatalf("%d services, want %d", len(st.Services), len(want))
	}
	for i, w := range want {
		s := st.Services[i]
		if s.Name != w.name || s.Command != w.command || s.Line != w.line {
			t.Errorf("service %d = %q: %q (line %d), want %q: %q (line %d)", i, s.Name, s.Command, s.Line, w.name, w.command, w.line)
		}
		if !s.Log || s.Restart != RestartNo || s.Dir != dir || s.ReadyTimeout != DefaultReadyTimeout || s.DependsOn != nil {
			t.Errorf("%s = %+v, want log, the defaults and the Procfile's directory", s.Name, s)
		}
		if port := strconv.Itoa(5000 + 100*i); !reflect.DeepEqual(s.Env, []EnvVar{{"PORT", port}}) {
			t.Errorf("%s's env = %v, want PORT=%s, as foreman gives it", s.Name, s.Env, port)
		}
	}
}

func TestLoadNoFile(t *testing.T) {
	t.Parallel()
	_, err := Load(t.TempDir())
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of an empty directory: %v, want fs.ErrNotExist", err)
	}
}

// TestTOMLItems: what go-toml may take time for is counted outside
// strings and comments only, so that a legal file's commands and
// comments never count toward maxItems, and a string's end is found as
// TOML finds it (escapes, multiline strings, the quotes a multiline
// string may end with), so that nothing after it escapes the count.
func TestTOMLItems(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text string
		want int
	}{
		{`a = 1`, 1},
		{`a.b = [1, 2.5]`, 5},
		{`a = "x=y, z.w [q]" # b = [1, 2]`, 1},
		{`a = 'C:\x=[' , b = 1`, 3},
		{`a = "quote \" = , ." , b = 1`, 3},
		{"a = \"\"\"many\n= , . [\nlines\"\"\", b = 1", 3},
		{"a = '''many\n= , . [\n''', b = 1", 3},
		{`a = ["""x"""", 1, 2]`, 4},
		{`a = ["""x""""", 1, 2]`, 4},
		{"a = \"unclosed\nb = 1, 2", 3},
		{"a = \"escaped end \\\nb = 1", 2},
		{"a = \"\"\"unclosed\nb = 1", 1},
		{`a = ""` + "\nb.c = 1", 3},
	} {
		if got := tomlItems([]byte(tc.text)); got != tc.want {
			t.Errorf("tomlItems(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
	if got := tomlItems([]byte(strings.Repeat("a=1\n", 10*maxItems))); got != maxItems+1 {
		t.Errorf("tomlItems of %d keys = %d, want it to stop at %d", 10*maxItems, got, maxItems+1)
	}
}

// TestLoadLargestLegalFile: a shellagent.toml at the bounds, maxServices
// services and maxItems keys, tables and array items, is read, and in
// well under a second (70 ms was measured on a loaded machine): the file
// is read on the session's actor.
func TestLoadLargestLegalFile(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range maxServices {
		fmt.Fprintf(&b, "[services.s%d]\ncommand = \"x\"\n", i)
	}
	b.WriteString("[services.s0.env]\n")
	for i := 0; tomlItems([]byte(b.String())) < maxItems; i++ {
		fmt.Fprintf(&b, "K%d = 1\n", i)
	}
	dir := project(t, map[string]string{TOMLFile: b.String()})
	start := time.Now()
	st, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if took, bound := time.Since(start), raceSlowdown*testloop.Bound(300*time.Millisecond); took > bound {
		t.Errorf("Load took %v, want within %v", took, bound)
	}
	if len(st.Services) != maxServices || len(st.Services[0].Env) != maxItems-3*maxServices-3 {
		t.Errorf("Load read %d services, the first with %d env entries; want %d and %d", len(st.Services), len(st.Services[0].Env), maxServices, maxItems-3*maxServices-3)
	}
}
