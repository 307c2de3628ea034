package supervisor

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"shellagent/acp"
	"shellagent/scenario"
)

// inputKind is what a prompt asks for.
type inputKind int

const (
	runCommand    inputKind = iota // CMD
	bgCommand                      // /bg CMD
	bgDetach                       // /bg
	listWork                       // /ps
	stopWork                       // /stop ID
	afterWork                      // /after DUR CMD
	everyWork                      // /every DUR CMD
	typeInput                      // /send ID TEXT, /keys ID KEY...
	resizeTerm                     // /resize ID COLSxROWS
	tailTerm                       // /tail ID [N]
	waitWork                       // /wait ID [PATTERN] [--timeout DUR] [--new]
	watchWork                      // /watch PATH CMD
	pauseWork                      // /pause ID
	resumeWork                     // /resume ID
	listScenarios                  // /scenario
	playScenario                   // /scenario NAME [HOLD]
	scenarioTurn                   // foreground work a playing scenario begins (no prompt)
	badInput                       // a slash command written wrong; problem says how
)

// input is a parsed prompt.
type input struct {
	kind    inputKind
	line    string        // the command line (runCommand, bgCommand, afterWork, everyWork)
	id      string        // stopWork, pauseWork, resumeWork, the terminal of typeInput, resizeTerm, tailTerm, the scenario's name (playScenario)
	delay   time.Duration // afterWork, everyWork; the scenario's hold (playScenario)
	problem string        // badInput
	wait    *waitSpec     // waitWork
	watch   *watchSpec    // watchWork

	data  []byte           // typeInput: the bytes typed
	what  string           // typeInput: what they are, for the answer
	size  acp.TerminalSize // resizeTerm
	lines int              // tailTerm
}

// minEvery is the shortest interval of a recurring job: a job that fires
// faster would keep the foreground busy and flood the conversation.
const minEvery = time.Second

// immediate reports whether the input acts at once even while foreground
// work runs, instead of waiting its turn.
func (in input) immediate() bool {
	switch in.kind {
	case bgCommand, bgDetach, listWork, stopWork, typeInput, resizeTerm, tailTerm, pauseWork, resumeWork, listScenarios:
		return true
	}
	return false
}

// slashCommands are the commands a prompt may start with, with the input
// hint shown to clients and the usage given when one is written wrong.
var slashCommands = []struct {
	name, description, hint, usage string
}{
	{"bg", "Run a command in the background, or move the running foreground command there", "command to start in the background (empty: detach the foreground command)", "/bg CMD, or /bg alone while a command runs"},
	{"ps", "List background work: ids, commands, age, status", "", "/ps"},
	{"stop", "Stop a background terminal or tool call by id", "terminal or tool call id, e.g. term_3", "/stop ID, e.g. /stop term_3"},
	{"after", "Run a command once, after a delay", "delay and command, e.g. 5m make test", "/after DUR CMD, e.g. /after 5m make test (DUR in Go syntax: 90s, 5m, 1h30m)"},
	{"every", "Run a command repeatedly, every interval, until stopped", "interval and command, e.g. 30s git fetch", "/every DUR CMD, e.g. /every 30s git fetch (DUR in Go syntax, at least 1s)"},
	{"send", "Type a line into a terminal: the text, then Enter", "terminal id and text, e.g. term_1 yes", "/send ID TEXT, e.g. /send term_1 yes"},
	{"keys", "Type keys into a terminal, named as tmux send-keys names them", "terminal id and keys, e.g. term_1 C-c", "/keys ID KEY..., e.g. /keys term_1 C-c or /keys term_1 Up Enter"},
	{"resize", "Set a terminal's size in columns and rows", "terminal id and COLSxROWS, e.g. term_1 200x50", "/resize ID COLSxROWS, e.g. /resize term_1 200x50"},
	{"tail", "Show the last lines of a terminal's output as text", "terminal id and a number of lines, e.g. term_1 50", "/tail ID [N], e.g. /tail term_1 50 (N: 1 to 200, 20 if omitted)"},
	{"wait", "Wait until a terminal prints a matching line, a port accepts connections, a URL answers, or the terminal exits", "terminal id and what to wait for, e.g. term_1 'ready on' or term_1 :3000", "/wait ID [PATTERN] [--timeout DUR] [--new], e.g. /wait term_1 'ready on', /wait term_1 :3000 or /wait term_1 http://localhost:3000/ (PATTERN: a regular expression, :PORT or an http:// URL; none waits for the exit; DUR at most 1h, 5m if omitted; --new ignores what was printed before)"},
	{"watch", "Run a command each time files under a path change", "path and command, e.g. src make test", "/watch PATH CMD, e.g. /watch src make test"},
	{"pause", "Pause a watch: changes run nothing until it is resumed", "watch tool call id, e.g. call_2", "/pause ID, e.g. /pause call_2"},
	{"resume", "Resume a paused watch", "watch tool call id, e.g. call_2", "/resume ID, e.g. /resume call_2"},
	{"scenario", "Play a scenario that shows a client one client-side rule of the protocol; alone, list them", "scenario name and hold, e.g. unknown-item 2s (empty: list them)", "/scenario to list them, or /scenario NAME [HOLD], e.g. /scenario unknown-item 2s (HOLD: how long each state is held, 0 to 1m, default 1s)"},
}

func availableCommands() []acp.AvailableCommand {
	out := make([]acp.AvailableCommand, 0, len(slashCommands))
	for _, c := range slashCommands {
		ac := acp.AvailableCommand{Type: "command", Name: c.name, Description: c.description}
		if c.hint != "" {
			ac.Input = &acp.CommandInput{Type: "text", Hint: c.hint}
		}
		out = append(out, ac)
	}
	return out
}

// promptLine joins a prompt's blocks into one input line: text blocks as
// they are, resource links as their shell-quoted path (file: URIs) or URI,
// separated by spaces. Other block types are refused with -32602, as the
// schema requires for unsupported content.
func promptLine(blocks []acp.ContentBlock) (string, error) {
	parts := make([]string, 0, len(blocks))
	for i, b := range blocks {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "resource_link":
			if b.URI == "" {
				return "", acp.InvalidParams("prompt[%d].uri: required", i)
			}
			path, err := linkPath(b.URI)
			if err != nil {
				return "", acp.InvalidParams("prompt[%d].uri: %v", i, err)
			}
			parts = append(parts, shellQuote(path))
		default:
			return "", acp.InvalidParams("prompt[%d].type: %q is not supported (shellagent takes text and resource_link blocks)", i, b.Type)
		}
	}
	line := strings.TrimSpace(strings.Join(parts, " "))
	if line == "" {
		return "", acp.InvalidParams("prompt: empty; send a command line")
	}
	return line, nil
}

// linkPath is what a resource link contributes to the command line: the
// local path of a file: URI, or the URI itself. A file: URI that names
// another host is refused: its path is not this machine's file.
func linkPath(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || u.Path == "" {
		return uri, nil
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", fmt.Errorf("%s names the host %q; a file URI must be local (file:///path or file://localhost/path)", uri, u.Host)
	}
	return u.Path, nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// parseInput reads a prompt line. A first word of the form /name (no other
// slash, so /usr/bin/env still runs as a command) is a slash command.
func parseInput(line string) input {
	word, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	if !strings.HasPrefix(word, "/") || strings.Contains(word[1:], "/") || len(word) == 1 {
		return input{kind: runCommand, line: line}
	}
	name := word[1:]
	switch name {
	case "bg":
		if rest == "" {
			return input{kind: bgDetach}
		}
		return input{kind: bgCommand, line: rest}
	case "ps":
		if rest != "" {
			return bad("/ps takes no arguments", "ps")
		}
		return input{kind: listWork}
	case "stop":
		if rest == "" || strings.ContainsAny(rest, " \t") {
			return bad("/stop needs exactly one terminal or tool call id", "stop")
		}
		return input{kind: stopWork, id: rest}
	case "after", "every":
		return parseScheduled(name, rest)
	case "send", "keys", "resize", "tail":
		return parseTerminalCommand(name, rest)
	case "wait":
		return parseWait(rest)
	case "watch":
		return parseWatch(rest)
	case "pause", "resume":
		if rest == "" || strings.ContainsAny(rest, " \t") {
			return bad(fmt.Sprintf("/%s needs exactly one watch's tool call id", name), name)
		}
		if name == "pause" {
			return input{kind: pauseWork, id: rest}
		}
		return input{kind: resumeWork, id: rest}
	case "scenario":
		return parseScenario(rest)
	}
	return input{kind: badInput, problem: fmt.Sprintf("Unknown command /%s. Available: %s. To run a program whose name starts with a slash, give its path (e.g. ./%s).", name, commandNames(), name)}
}

func parseScheduled(name, rest string) input {
	durText, cmd, _ := strings.Cut(rest, " ")
	cmd = strings.TrimSpace(cmd)
	if durText == "" || cmd == "" {
		return bad(fmt.Sprintf("/%s needs a duration and a command", name), name)
	}
	d, err := time.ParseDuration(durText)
	if err != nil {
		return bad(fmt.Sprintf("/%s: %q is not a duration", name, durText), name)
	}
	if d <= 0 {
		return bad(fmt.Sprintf("/%s: the duration must be more than 0, got %s", name, durText), name)
	}
	if name == "every" && d < minEvery {
		return bad(fmt.Sprintf("/every: the interval must be at least %s, got %s", minEvery, durText), name)
	}
	kind := afterWork
	if name == "every" {
		kind = everyWork
	}
	return input{kind: kind, delay: d, line: cmd}
}

// parseScenario reads /scenario's arguments: none, or a scenario's name
// and an optional hold.
func parseScenario(rest string) input {
	if rest == "" {
		return input{kind: listScenarios}
	}
	fields := strings.Fields(rest)
	if len(fields) > 2 {
		return bad("/scenario takes a name and at most a hold", "scenario")
	}
	if scenario.Lookup(fields[0]) == nil {
		return input{kind: badInput, problem: fmt.Sprintf("No scenario %q: /scenario alone lists them.", fields[0])}
	}
	in := input{kind: playScenario, id: fields[0], delay: scenario.DefaultHold}
	if len(fields) == 2 {
		d, err := time.ParseDuration(fields[1])
		if err != nil || d < 0 || d > scenario.MaxHold {
			return bad(fmt.Sprintf("/scenario: %q is not a hold from 0 to %s", fields[1], scenario.MaxHold), "scenario")
		}
		in.delay = d
	}
	return in
}

func bad(problem, name string) input {
	for _, c := range slashCommands {
		if c.name == name {
			return input{kind: badInput, problem: problem + ". Write it as " + c.usage + "."}
		}
	}
	return input{kind: badInput, problem: problem + "."}
}

func commandNames() string {
	names := make([]string, len(slashCommands))
	for i, c := range slashCommands {
		names[i] = "/" + c.name
	}
	return strings.Join(names, ", ")
}
