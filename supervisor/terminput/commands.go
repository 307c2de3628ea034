package terminput

import (
	"fmt"
	"strings"

	"shellagent/supervisor/work"
)

// Commands are /send, /keys, /resize and /tail, the entries of package
// supervisor's command table. They act at once, like /ps, and answer in
// an agent message; their args are Args.
func Commands() []work.Command {
	return []work.Command{
		{
			Name: "send", Syntax: "ID TEXT", Now: true, Parse: parse("send"), Act: send,
			Description: "Type a line into a terminal: the text, then Enter",
			Hint:        "terminal id and text, e.g. term_1 yes",
			Usage:       "/send ID TEXT, e.g. /send term_1 yes",
		},
		{
			Name: "keys", Syntax: "ID KEY...", Now: true, Parse: parse("keys"), Act: send,
			Description: "Type keys into a terminal, named as tmux send-keys names them",
			Hint:        "terminal id and keys, e.g. term_1 C-c",
			Usage:       "/keys ID KEY..., e.g. /keys term_1 C-c or /keys term_1 Up Enter",
		},
		{
			Name: "resize", Syntax: "ID COLSxROWS", Now: true, Parse: parse("resize"),
			Act: func(h work.RunHost, args any) {
				a := args.(Args) // Safe: parse made them.
				SetSize(h, a.ID, a.Size)
			},
			Description: "Set a terminal's size in columns and rows",
			Hint:        "terminal id and COLSxROWS, e.g. term_1 200x50",
			Usage:       "/resize ID COLSxROWS, e.g. /resize term_1 200x50",
		},
		{
			Name: "tail", Syntax: "ID [N]", Now: true, Parse: parse("tail"),
			Look: func(h work.RunHost, args any) string {
				a := args.(Args) // Safe: parse made them.
				return h.Tail(a.ID, a.Lines)
			},
			Description: "Show the last lines of a terminal's output as text",
			Hint:        "terminal id and a number of lines, e.g. term_1 50",
			Usage:       "/tail ID [N], e.g. /tail term_1 50 (N: 1 to 200, 20 if omitted)",
		},
	}
}

// parse reads the Args of command name: a terminal id, then what Parse
// reads.
func parse(name string) func(rest string) (any, string, bool) {
	return func(rest string) (any, string, bool) {
		id, arg, _ := strings.Cut(rest, " ")
		if id == "" {
			return nil, fmt.Sprintf("/%s needs a terminal id", name), false
		}
		a, problem, usage := Parse(name, arg)
		if problem != "" {
			return nil, problem, !usage
		}
		a.ID = id
		return a, "", false
	}
}

// send serves /send and /keys (Send).
func send(h work.RunHost, args any) {
	a := args.(Args) // Safe: parse made them.
	Send(h, a.ID, a)
}
