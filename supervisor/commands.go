package supervisor

import (
	"fmt"
	"slices"
	"strings"

	"shellagent/acp"
	"shellagent/supervisor/jobs"
	"shellagent/supervisor/service"
	"shellagent/supervisor/terminput"
	"shellagent/supervisor/wait"
	"shellagent/supervisor/watch"
	"shellagent/supervisor/work"
)

// A command is one slash command, whole: how it is written, what clients
// are shown of it, how its arguments are read, and what it runs. The
// table (commands) is the only list of them: availableCommands, parsing
// (parseInput) and dispatch (state.start, Session.prompt) all read it.
// The session's own commands are written here; a kind of work in a
// package of its own declares its commands there (work.Command, its
// Commands), which the table assembles (kindCommand). Adding a command is
// one entry, and one file for its work.
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
	// lists: what it starts is listed in the background (/bg, a job, a
	// watch): refused while the session's list is full (listFull).
	lists bool
	// What it runs: act, at once (a turn of its own ends once it is
	// done); or, if act is nil, hold, as foreground work that holds the
	// turn until it is over.
	act  func(st *state, in input)
	hold func(st *state, t *turn)
	// supersede, if not nil, is told of the held input when a kind's
	// work holds the foreground, fg (work.Command.Supersede).
	supersede func(st *state, fg work.Foreground, in input)
	// look, for a command that only reads, returns what it says, and
	// changes nothing (work.Command.Look); its act is to say it.
	look func(st *state, in input) string
}

// input is a parsed prompt: the command it is, and its arguments.
type input struct {
	cmd *command
	// line is the command line (a shell line, /bg CMD), or the one a
	// kind's command names (work.Command.Line): it titles a session that
	// has none yet.
	line    string
	problem string // malformed
	args    any    // the arguments: /stop's id, the scenario's name and hold, a kind's command's (work.Command.Parse)
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
	own := []*command{
		{
			name: "bg", syntax: "CMD", now: true, lists: true, parse: parseBg, act: actBg,
			description: "Run a command in the background, or move the running foreground command there",
			hint:        "command to start in the background (empty: detach the foreground command)",
			usage:       "/bg CMD, or /bg alone while a command runs",
		},
		{
			name: "ps", now: true, parse: kindParse(work.ParseNone("ps"), nil), look: listBackground,
			description: "List background work: ids, commands, age, status",
			usage:       "/ps",
		},
		{
			name: "stop", syntax: "ID", now: true, parse: kindParse(work.ParseWord("/stop needs exactly one terminal or tool call id"), nil),
			act:         actStop,
			description: "Stop a background terminal or tool call by id",
			hint:        "terminal or tool call id, e.g. term_3",
			usage:       "/stop ID, e.g. /stop term_3",
		},
	}
	scenario := &command{
		name: "scenario", syntax: "NAME [HOLD]", now: true, parse: parseScenario, act: listScenarios,
		description: "Play a scenario that shows a client one client-side rule of the protocol; alone, list them",
		hint:        "scenario name and hold, e.g. unknown-item 2s (empty: list them)",
		usage:       "/scenario to list them, or /scenario NAME [HOLD], e.g. /scenario unknown-item 2s (HOLD: how long each state is held, 0 to 1m, default 1s)",
	}
	commands = slices.Concat(
		own,
		kindCommands(jobs.Commands(), terminput.Commands(), wait.Commands(), watch.Commands()),
		[]*command{scenario},
		kindCommands(service.Commands(stackOf)),
	)
	for _, c := range commands {
		if look := c.look; look != nil {
			c.act = func(st *state, in input) { st.out.agentMessage(look(st, in)) }
		}
	}
}

// kindCommands are the entries of the commands that kinds of work in
// packages of their own declare, in their order.
func kindCommands(lists ...[]work.Command) []*command {
	var out []*command
	for _, k := range slices.Concat(lists...) {
		out = append(out, kindCommand(k))
	}
	return out
}

// kindCommand is the entry of k, a kind's command: its args are the
// input's, and it runs with the session as its work.RunHost (host) and,
// if it holds the foreground, its turn as a work.Turn (kindTurn).
func kindCommand(k work.Command) *command {
	c := &command{
		name: k.Name, syntax: k.Syntax, description: k.Description, hint: k.Hint, usage: k.Usage,
		now: k.Now, lists: k.Lists, parse: kindParse(k.Parse, k.Line),
	}
	switch {
	case k.Look != nil:
		c.look = func(st *state, in input) string { return k.Look(host{st}, in.args) }
	case k.Act != nil:
		c.act = func(st *state, in input) { k.Act(host{st}, in.args) }
	case k.Hold != nil:
		c.hold = func(st *state, t *turn) {
			k.Hold(host{st}, kindTurn{st, t}, t.in.args)
			supersedeHeld(st, t)
		}
	}
	if k.Supersede != nil {
		c.supersede = func(st *state, fg work.Foreground, in input) { k.Supersede(host{st}, fg, in.args) }
	}
	return c
}

// kindParse is the parse of a command whose arguments parse reads (a
// work.Command's Parse), and line, if not nil, names their command line.
func kindParse(parse func(string) (any, string, bool), line func(any) string) func(*command, string) input {
	return func(c *command, rest string) input {
		args, problem, whole := parse(rest)
		switch {
		case problem != "" && whole:
			return input{cmd: malformed, problem: problem + "."}
		case problem != "":
			return bad(problem, c.name)
		}
		in := input{args: args}
		if line != nil {
			in.line = line(args)
		}
		return in
	}
}

// stackOf returns the stack of h, the session's host (host.Stack): what
// the stack's commands (service.Commands) act on.
func stackOf(h work.RunHost) *service.Stack {
	return h.(host).Stack() // Safe: the table's commands are given the session's host.
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

// parseBg reads /bg's arguments: a command line, or none.
func parseBg(_ *command, rest string) input { return input{line: rest} }

// actBg serves /bg: /bg CMD starts CMD in the background; /bg alone moves
// the foreground work there.
func actBg(st *state, in input) {
	if line := in.line; line != "" { // directly as background work
		if st.settings.Ask {
			st.ask(line, nil)
			return
		}
		if t := st.launch(st.newCall(callRunning, "execute", line), line, launchOptions{}); t != nil {
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

// listBackground is what /ps says. It names each listed terminal's
// processes: a scan of /proc (or a cgroup): slow work.
func listBackground(st *state, _ input) string {
	procs := st.list.processes()
	found := make([]string, len(procs))
	st.s.slow()
	for i, p := range procs {
		found[i] = members(p)
	}
	return st.list.listing(st.s.sv.cfg.clock.Now(), found, st.kit.items())
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

// parseScenario reads /scenario's arguments: none (list them), or what
// the kit reads (Kit.Play): a scenario's name and an optional hold.
func parseScenario(_ *command, rest string) input {
	if rest == "" {
		return input{}
	}
	return input{cmd: scenarioPlay, args: rest}
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
