package stack

import (
	"bytes"
	"strconv"
	"strings"
)

// The PORT of a Procfile's services, as foreman and overmind assign it:
// procfilePort for the first service, procfilePortStep more for each
// next one.
const (
	procfilePort     = 5000
	procfilePortStep = 100
)

// parseProcfile fills st.Services from a Procfile: one "name: command"
// line per service, as foreman reads it; blank lines and lines starting
// with '#' are skipped. Every service keeps a log, takes the defaults, and
// has PORT in its environment as foreman sets it (procfilePort; none past
// port 65535), since a Procfile's commands often listen on $PORT.
func (st *Stack) parseProcfile(data []byte) error {
	for i, raw := range bytes.Split(data, []byte("\n")) {
		line := i + 1
		text := strings.TrimSpace(string(raw))
		if text == "" || text[0] == '#' {
			continue
		}
		name, command, ok := strings.Cut(text, ":")
		name = strings.TrimSpace(name)
		command = strings.TrimSpace(command)
		switch {
		case !ok:
			return st.refuse(line, "want \"name: command\"")
		case !validName(name):
			return st.refuse(line, "%q: a service's name is letters, digits, '_', '-' and '.' (not first), at most 64", name)
		case command == "":
			return st.refuse(line, "%s: no command", name)
		case strings.IndexByte(command, 0) >= 0:
			return st.refuse(line, "%s: the command contains a NUL byte", name)
		case st.Service(name) != nil:
			return st.refuse(line, "%s: declared again (first on line %d)", name, st.Service(name).Line)
		case len(st.Services) == maxServices:
			return st.refuse(line, "%s: more than %d services: a Procfile is a few lines written by hand, so this one is not read", name, maxServices)
		}
		var env []EnvVar
		if port := procfilePort + procfilePortStep*len(st.Services); port <= 65535 {
			env = []EnvVar{{Key: "PORT", Value: strconv.Itoa(port)}}
		}
		st.add(&Service{
			Name:         name,
			Command:      command,
			Dir:          st.Dir,
			Env:          env,
			ReadyTimeout: DefaultReadyTimeout,
			Restart:      RestartNo,
			MaxRestarts:  DefaultMaxRestarts,
			Backoff:      DefaultBackoff,
			Log:          true,
			Line:         line,
			dependsLine:  line,
		})
	}
	return nil
}
