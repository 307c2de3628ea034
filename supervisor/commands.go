package supervisor

import (
	"fmt"
	"strings"
	"time"

	"shellagent/acp"
	"shellagent/supervisor/jobs"
	"shellagent/supervisor/wait"
	"shellagent/supervisor/watch"
)

// A command is one slash command, whole: how it is written, what clients
// are shown of it, how its arguments are read, and what it runs. The
// table (commands) is the only list of them: availableCommands, parsing
// (parseInput) and dispatch (state.start, Session.prompt) all read it.
// Adding a command is one entry here, and one file for its work.
type command struct {
	name        string // without the slash; empty for the inputs no slash command writes
	syntax      string // its arguments: "ID [N]"; empty if it takes none
	description string
	hint        string // the input hint shown to clients; empty if it takes no arguments
	usage       string // how to write it, given when it is written wrong

	// parse reads the arguments (the rest of the line, trimmed) into an
	// input of c, or of another command (a /scenario that plays), or of
	// malformed.
	parse func(c *command, rest string) input
	// now: it acts at once even while foreground work runs, instead of
	// waiting its turn.
	now bool
	// What it runs: act, at once (a turn of its own ends once it is
	// done); or, if act is nil, hold, as foreground work that holds the
	// turn until it is over.
	act  func(st *state, in input)
	hold func(st *state, t *turn)
}

// input is a parsed prompt: the command it is, and its arguments.
type input struct {
	cmd     *command
	line    string        // the command line (a shell line, /bg CMD, /after, /every)
	id      string        // /stop, /pause, /resume, the terminal of /send, /keys, /resize, /tail; the scenario's name
	delay   time.Duration // /after, /every; the scenario's hold
	problem string        // malformed
	waitFor *wait.Spec    // /wait
	watchOf *watch.Spec   // /watch

	data  []byte           // /send, /keys: the bytes typed
	what  string           // /send, /keys: what they are, for the answer
	size  acp.TerminalSize // /resize
	lines int              // /tail
}

// immediate reports whether the input acts at once even while foreground
// work runs, instead of waiting its turn.
func (in input) immediate() bool { return in.cmd.now }

// The inputs that no slash command of the table writes.
var (
	// shellLine is a command line, run as foreground work: a prompt that
	// is not a slash command, a job's firing, a watch's run.
	shellLine = &command{}
	// malformed is a slash command written wrong: its problem is said.
	malformed = &command{act: func(st *state, in input) { st.out.agentMessage(in.problem) }}
	// scenarioPlay is /scenario NAME [HOLD]: the kit plays it, holding
	// the foreground, or says why not (kit.go).
	scenarioPlay = &command{}
	// kitWork is the foreground work a playing scenario begins (no
	// prompt).
	kitWork = &command{}
)

// commands is the table of slash commands, in the order clients are shown
// them. It is filled by init: the parsers refer back to it, for usage.
var commands []*command

func init() {
	shellLine.hold = runForeground
	scenarioPlay.hold = playScenario
	kitWork.hold = beginKitWork
	commands = []*command{
		{
			name: "bg", syntax: "CMD", now: true, parse: parseBg, act: actBg,
			description: "Run a command in the background, or move the running foreground command there",
			hint:        "command to start in the background (empty: detach the foreground command)",
			usage:       "/bg CMD, or /bg alone while a command runs",
		},
		{
			name: "ps", now: true, parse: parseNoArgs, act: listBackground,
			description: "List background work: ids, commands, age, status",
			usage:       "/ps",
		},
		{
			name: "stop", syntax: "ID", now: true, parse: parseID("/stop needs exactly one terminal or tool call id"),
			act:         actStop,
			description: "Stop a background terminal or tool call by id",
			hint:        "terminal or tool call id, e.g. term_3",
			usage:       "/stop ID, e.g. /stop term_3",
		},
		{
			name: "after", syntax: "DUR CMD", parse: parseScheduled,
			act:         func(st *state, in input) { jobs.Schedule(host{st}, in.line, in.delay, false) },
			description: "Run a command once, after a delay",
			hint:        "delay and command, e.g. 5m make test",
			usage:       "/after DUR CMD, e.g. /after 5m make test (DUR in Go syntax: 90s, 5m, 1h30m)",
		},
		{
			name: "every", syntax: "DUR CMD", parse: parseScheduled,
			act:         func(st *state, in input) { jobs.Schedule(host{st}, in.line, in.delay, true) },
			description: "Run a command repeatedly, every interval, until stopped",
			hint:        "interval and command, e.g. 30s git fetch",
			usage:       "/every DUR CMD, e.g. /every 30s git fetch (DUR in Go syntax, at least 1s)",
		},
		{
			name: "send", syntax: "ID TEXT", now: true, parse: parseTerminalCommand, act: typeIntoTerminal,
			description: "Type a line into a terminal: the text, then Enter",
			hint:        "terminal id and text, e.g. term_1 yes",
			usage:       "/send ID TEXT, e.g. /send term_1 yes",
		},
		{
			name: "keys", syntax: "ID KEY...", now: true, parse: parseTerminalCommand, act: typeIntoTerminal,
			description: "Type keys into a terminal, named as tmux send-keys names them",
			hint:        "terminal id and keys, e.g. term_1 C-c",
			usage:       "/keys ID KEY..., e.g. /keys term_1 C-c or /keys term_1 Up Enter",
		},
		{
			name: "resize", syntax: "ID COLSxROWS", now: true, parse: parseTerminalCommand, act: resizeTerminal,
			description: "Set a terminal's size in columns and rows",
			hint:        "terminal id and COLSxROWS, e.g. term_1 200x50",
			usage:       "/resize ID COLSxROWS, e.g. /resize term_1 200x50",
		},
		{
			name: "tail", syntax: "ID [N]", now: true, parse: parseTerminalCommand,
			act:         func(st *state, in input) { st.out.agentMessage(st.work.tail(in.id, in.lines)) },
			description: "Show the last lines of a terminal's output as text",
			hint:        "terminal id and a number of lines, e.g. term_1 50",
			usage:       "/tail ID [N], e.g. /tail term_1 50 (N: 1 to 200, 20 if omitted)",
		},
		{
			name: "wait", syntax: "ID [PATTERN] [--timeout DUR] [--new]",
			parse:       parseWait,
			hold:        func(st *state, t *turn) { wait.Start(host{st}, kindTurn{st, t}, t.in.waitFor) },
			description: "Wait until a terminal prints a matching line, a port accepts connections, a URL answers, or the terminal exits",
			hint:        "terminal id and what to wait for, e.g. term_1 'ready on' or term_1 :3000",
			usage:       "/wait ID [PATTERN] [--timeout DUR] [--new], e.g. /wait term_1 'ready on', /wait term_1 :3000 or /wait term_1 http://localhost:3000/ (PATTERN: a regular expression, :PORT or an http:// URL; none waits for the exit; DUR at most 1h, 5m if omitted; --new ignores what was printed before)",
		},
		{
			name: "watch", syntax: "PATH CMD",
			parse:       parseWatch,
			act:         func(st *state, in input) { watch.Start(host{st}, in.watchOf) },
			description: "Run a command each time files under a path change",
			hint:        "path and command, e.g. src make test",
			usage:       "/watch PATH CMD, e.g. /watch src make test",
		},
		{
			name: "pause", syntax: "ID", now: true, parse: parseID("/pause needs exactly one watch's tool call id"),
			act:         func(st *state, in input) { watch.Pause(host{st}, in.id) },
			description: "Pause a watch: changes run nothing until it is resumed",
			hint:        "watch tool call id, e.g. call_2",
			usage:       "/pause ID, e.g. /pause call_2",
		},
		{
			name: "resume", syntax: "ID", now: true, parse: parseID("/resume needs exactly one watch's tool call id"),
			act:         func(st *state, in input) { watch.Resume(host{st}, in.id) },
			description: "Resume a paused watch",
			hint:        "watch tool call id, e.g. call_2",
			usage:       "/resume ID, e.g. /resume call_2",
		},
		{
			name: "scenario", syntax: "NAME [HOLD]", now: true, parse: parseScenario, act: listScenarios,
			description: "Play a scenario that shows a client one client-side rule of the protocol; alone, list them",
			hint:        "scenario name and hold, e.g. unknown-item 2s (empty: list them)",
			usage:       "/scenario to list them, or /scenario NAME [HOLD], e.g. /scenario unknown-item 2s (HOLD: how long each state is held, 0 to 1m, default 1s)",
		},
	}
	commands = append(commands, stackCommands()...) // stackcmds.go
}

// lookup returns the slash command named name, or nil.
func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

func availableCommands() []acp.AvailableCommand {
	out := make([]acp.AvailableCommand, 0, len(commands))
	for _, c := range commands {
		ac := acp.AvailableCommand{Type: "command", Name: c.name, Description: c.description}
		if c.hint != "" {
			ac.Input = &acp.CommandInput{Type: "text", Hint: c.hint}
		}
		out = append(out, ac)
	}
	return out
}

// parseInput reads a prompt line. A first word of the form /name (no other
// slash, so /usr/bin/env still runs as a command) is a slash command.
func parseInput(line string) input {
	word, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	if !strings.HasPrefix(word, "/") || strings.Contains(word[1:], "/") || len(word) == 1 {
		return input{cmd: shellLine, line: line}
	}
	name := word[1:]
	c := lookup(name)
	if c == nil {
		return input{cmd: malformed, problem: fmt.Sprintf("Unknown command /%s. Available: %s. To run a program whose name starts with a slash, give its path (e.g. ./%s).", name, commandNames(), name)}
	}
	in := c.parse(c, rest)
	if in.cmd == nil {
		in.cmd = c
	}
	return in
}

// parseNoArgs reads the arguments of a command that takes none.
func parseNoArgs(c *command, rest string) input {
	if rest != "" {
		return bad("/"+c.name+" takes no arguments", c.name)
	}
	return input{}
}

// parseID reads the arguments of a command that takes one id; problem
// says what it needs.
func parseID(problem string) func(*command, string) input {
	return func(c *command, rest string) input {
		if rest == "" || strings.ContainsAny(rest, " \t") {
			return bad(problem, c.name)
		}
		return input{id: rest}
	}
}

// parseBg reads /bg's arguments: a command line, or none.
func parseBg(_ *command, rest string) input { return input{line: rest} }

// actBg serves /bg: /bg CMD starts CMD in the background; /bg alone moves
// the foreground work there.
func actBg(st *state, in input) {
	if line := in.line; line != "" { // directly as background work
		if st.settings.ask {
			st.ask(line, nil)
			return
		}
		if t := st.launch(st.newCall(callRunning, "execute", line), line); t != nil {
			st.handOff(t, "Started in the background.")
		}
		return
	}
	fg := st.turns.fg
	if fg == nil {
		st.out.agentMessage("Nothing is running in the foreground: /bg alone moves the running command to the background. To start a command in the background, write /bg CMD.")
		return
	}
	fg.fore.toBackground(st, fg)
}

// listBackground serves /ps. It names each listed terminal's processes: a
// scan of /proc (or a cgroup): slow work.
func listBackground(st *state, _ input) {
	procs := st.list.processes()
	found := make([]string, len(procs))
	st.s.slow()
	for i, p := range procs {
		found[i] = members(p)
	}
	st.out.agentMessage(st.list.listing(st.s.sv.cfg.clock.Now(), found, st.kit.items()))
}

// listScenarios serves /scenario alone.
func listScenarios(st *state, _ input) {
	if k := st.s.sv.cfg.Kit; k != nil {
		st.out.agentMessage(k.Listing(scene{st: st}.V1()))
		return
	}
	st.out.agentMessage(noKit)
}

// noKit is what /scenario says in a session with no kit.
const noKit = "This agent plays no scenarios."

// parseScheduled reads the arguments of /after and /every (jobs.Parse).
func parseScheduled(c *command, rest string) input {
	d, line, problem := jobs.Parse(c.name == "every", rest)
	if problem != "" {
		return bad(problem, c.name)
	}
	return input{delay: d, line: line}
}

// parseWait reads the arguments of /wait (wait.Parse).
func parseWait(c *command, rest string) input {
	spec, problem := wait.Parse(rest)
	if problem != "" {
		return bad(problem, c.name)
	}
	return input{waitFor: spec}
}

// parseWatch reads the arguments of /watch (watch.Parse).
func parseWatch(c *command, rest string) input {
	spec, problem := watch.Parse(rest)
	if problem != "" {
		return bad(problem, c.name)
	}
	return input{watchOf: spec}
}

// parseScenario reads /scenario's arguments: none (list them), or what
// the kit reads (Kit.Play): a scenario's name and an optional hold.
func parseScenario(_ *command, rest string) input {
	if rest == "" {
		return input{}
	}
	return input{cmd: scenarioPlay, id: rest}
}

// bad is the input of command name written wrong: the problem, then how
// to write it.
func bad(problem, name string) input {
	if c := lookup(name); c != nil {
		return input{cmd: malformed, problem: problem + ". Write it as " + c.usage + "."}
	}
	return input{cmd: malformed, problem: problem + "."}
}

func commandNames() string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = "/" + c.name
	}
	return strings.Join(names, ", ")
}
