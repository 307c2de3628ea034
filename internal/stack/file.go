package stack

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The stack file's names, in the order Load looks for them.
const (
	TOMLFile = "shellagent.toml"
	Procfile = "Procfile"
)

// Defaults of a service's optional keys.
const (
	DefaultReadyTimeout = 60 * time.Second
	DefaultMaxRestarts  = 5
	DefaultBackoff      = time.Second
)

// maxFileSize bounds the stack file Load reads: a stack file is a few KB
// written by hand; anything this large is not one, and is refused before
// it is parsed (a shellagent.toml's keys are bounded too: maxItems).
const maxFileSize = 256 << 10

// maxServices bounds the services of a stack: /up starts each in a
// terminal of its own, and a project has tens at most.
const maxServices = 256

// Restart is a service's restart key: when a run that ended on its own is
// followed by another.
type Restart string

// The values of the restart key.
const (
	RestartNo        Restart = "no"         // never (the default)
	RestartOnFailure Restart = "on-failure" // after a non-zero exit or a signal
	RestartAlways    Restart = "always"     // after any exit
)

// Stack is a project's services as its stack file declares them. Load
// makes it, whole or not at all (a Stack made otherwise has no services);
// it is not changed afterwards and may be read by any number of
// goroutines.
type Stack struct {
	// File is the path of the file it was read from: Load's dir joined
	// with TOMLFile or Procfile.
	File string
	// Dir is the absolute directory of File, the project's directory.
	Dir string
	// Services in the order the file declares them.
	Services []*Service

	index map[string]int // name: its place in Services
}

// Service is one [services.NAME] table of the stack file (or one line of
// a Procfile) with every default filled in.
type Service struct {
	Name    string
	Command string // run by the shell, as a prompt is
	// Dir is the absolute working directory: the cwd key resolved against
	// Stack.Dir, or Stack.Dir itself.
	Dir string
	// Env is added to the session's environment, sorted by key; nil if
	// the service sets nothing.
	Env       []EnvVar
	DependsOn []string // names of services of the same stack, no repeats
	// Ready is the readiness condition in /wait's language (REGEX, :PORT,
	// http://…, exec:CMD), as written, and one waitfor.ParseReady
	// accepts; "" means ready once started.
	Ready        string
	ReadyTimeout time.Duration // > 0
	Restart      Restart
	MaxRestarts  int           // >= 0
	Backoff      time.Duration // >= 0, the first restart's delay
	Ports        []int         // 1..65535, checked free before each run
	Log          bool          // keep STATE/logs/PROJECT/NAME.log
	// Line is the line of the file that declares the service.
	Line int

	dependsLine int // the line of depends_on, or Line
}

// EnvVar is one entry of a service's env table.
type EnvVar struct{ Key, Value string }

// Environ returns Env as "KEY=value" entries, for appending to an
// environment (a later entry wins, as in exec.Cmd.Env).
func (s *Service) Environ() []string {
	env := make([]string, len(s.Env))
	for i, e := range s.Env {
		env[i] = e.Key + "=" + e.Value
	}
	return env
}

// Policy is the part of the service that its Restarter follows.
func (s *Service) Policy() Policy {
	return Policy{Restart: s.Restart, MaxRestarts: s.MaxRestarts, Backoff: s.Backoff}
}

// Service returns the service called name, or nil.
func (st *Stack) Service(name string) *Service {
	if i, ok := st.index[name]; ok {
		return st.Services[i]
	}
	return nil
}

// add appends s, whose name no service has, to the stack's services.
func (st *Stack) add(s *Service) {
	if st.index == nil {
		st.index = make(map[string]int)
	}
	st.index[s.Name] = len(st.Services)
	st.Services = append(st.Services, s)
}

// Error is a stack file refused: the file, the line (0 when the reason is
// about the whole file) and the reason, which starts with the key it is
// about, as in "services.api: unknown key \"comand\"".
type Error struct {
	File   string
	Line   int
	Reason string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Reason
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason)
}

// Load reads the stack file of the project in dir: TOMLFile if there is
// one, else Procfile. A file that breaks a rule of the package doc is
// refused with an *Error naming the file, the line and the reason, and
// no Stack; when dir has neither file, the error wraps fs.ErrNotExist.
func Load(dir string) (*Stack, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("stack: load %s: %w", dir, err)
	}
	for _, name := range []string{TOMLFile, Procfile} {
		path := filepath.Join(dir, name)
		data, err := readFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stack: load %s: %w", path, err)
		}
		if len(data) > maxFileSize {
			return nil, &Error{File: path, Reason: fmt.Sprintf("larger than %d KiB: a stack file is a few KB written by hand, so this one is not read", maxFileSize>>10)}
		}
		return parse(path, abs, data)
	}
	return nil, fmt.Errorf("stack: no %s or %s in %s: %w", TOMLFile, Procfile, abs, fs.ErrNotExist)
}

// parse reads data, the stack file at path (named TOMLFile or Procfile)
// of the project in abs, as Load does.
func parse(path, abs string, data []byte) (*Stack, error) {
	st := &Stack{File: path, Dir: abs}
	var err error
	if filepath.Base(path) == TOMLFile {
		err = st.parseTOML(data)
	} else {
		err = st.parseProcfile(data)
	}
	if err == nil {
		err = st.check()
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// readFile reads path, at most one byte more than maxFileSize.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() // Best effort: read only.
	return io.ReadAll(io.LimitReader(f, maxFileSize+1))
}

// refuse returns the Error at line of the stack's file.
func (st *Stack) refuse(line int, format string, args ...any) error {
	return &Error{File: st.File, Line: line, Reason: fmt.Sprintf(format, args...)}
}

// validName reports whether name can name a service: it becomes a file
// name (NAME.log) and a word of /up, so letters, digits, '_', '-' and
// '.', not first.
func validName(name string) bool {
	if name == "" || name[0] == '.' || len(name) > 64 {
		return false
	}
	for _, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '-' || c == '.'
		if !ok {
			return false
		}
	}
	return true
}

// check refuses what no single key shows: a stack without services, a
// dependency on a missing service, a cycle.
func (st *Stack) check() error {
	if len(st.Services) == 0 {
		return st.refuse(0, "no services")
	}
	for _, s := range st.Services {
		for _, d := range s.DependsOn {
			if st.Service(d) == nil {
				return st.refuse(s.dependsLine, "services.%s.depends_on: no service %q", s.Name, d)
			}
		}
	}
	if cycle := st.cycle(); cycle != nil {
		s := st.Service(cycle[0])
		return st.refuse(s.dependsLine, "services.%s.depends_on: cycle %s", s.Name, strings.Join(cycle, " -> "))
	}
	return nil
}

// cycle returns a cycle of depends_on, its first name repeated at its end,
// or nil: a depth-first search from each service in file order.
func (st *Stack) cycle() []string {
	const (
		unseen = iota
		onPath
		done
	)
	mark := make(map[string]int, len(st.Services))
	var path []string
	var visit func(name string) []string
	visit = func(name string) []string {
		switch mark[name] {
		case onPath:
			i := slices.Index(path, name)
			return append(slices.Clone(path[i:]), name)
		case done:
			return nil
		}
		mark[name] = onPath
		path = append(path, name)
		for _, d := range st.Service(name).DependsOn {
			if c := visit(d); c != nil {
				return c
			}
		}
		path = path[:len(path)-1]
		mark[name] = done
		return nil
	}
	for _, s := range st.Services {
		if c := visit(s.Name); c != nil {
			return c
		}
	}
	return nil
}
