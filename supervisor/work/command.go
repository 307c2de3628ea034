package work

import "strings"

// A Command is one slash command of a kind of work, whole: how it is
// written, what clients are shown of it, how its arguments are read, and
// what it runs. A kind's package declares its commands (its Commands);
// package supervisor's table assembles them, with the session's own, in
// the order clients are shown them (availableCommands), and parses and
// dispatches from it. Adding a kind's command is one Command in its
// package.
type Command struct {
	Name        string // without the slash
	Syntax      string // its arguments: "ID [N]"; empty if it takes none
	Description string
	Hint        string // the input hint shown to clients; empty if it takes no arguments
	Usage       string // how to write it, said after a problem with its arguments

	// Now: it acts at once even while foreground work runs, instead of
	// waiting its turn. Only a command with an Act (or a Look) does.
	Now bool
	// Lists: what it starts is listed in the background (a job, a
	// watch): the session refuses it while its list is full.
	Lists bool

	// Parse reads the arguments, the rest of the prompt line trimmed,
	// into the args that Act or Hold is given. A problem, if not empty,
	// says what is wrong with them in a sentence without its final
	// period: the session says it followed by how to write the command
	// (". Write it as " Usage "."), or, if whole, by nothing but its
	// period.
	Parse func(rest string) (args any, problem string, whole bool)
	// Line, if not nil, is the command line that args name (an /after's
	// command): a session with no title yet takes it as its title, as it
	// takes a shell line's.
	Line func(args any) string

	// What it runs, on the session's actor, with args from Parse: Act,
	// at once (a turn of its own ends once it is done); or, if Act is
	// nil, Hold, as foreground work that holds the turn t until it is
	// over (Turn.Hold, then Turn.End or Host.EndTurn). h is the session.
	Act  func(h RunHost, args any)
	Hold func(h RunHost, t Turn, args any)

	// Supersede, if not nil, is told of the command, with args from
	// Parse, while its prompt is held behind fg, a kind's work that holds
	// the foreground turn: it may end fg's turn (fg's Turn.End), which
	// the held command has made pointless, so that the queue moves on
	// at once (a stack's /down ends the wait of an /up for a service it
	// stops). It runs on the session's actor, once the prompt is held
	// behind fg, and again each time a kind's command takes the
	// foreground (its Hold is done) while the prompt is still held.
	Supersede func(h RunHost, fg Foreground, args any)

	// Look, for a command that only reads, returns what it says; its
	// Act, then, is to say it (Host.Say). Look must send nothing and
	// start, stop or change no work: a client that does not hold the
	// session may call it (_shellagent/session/look), and nothing of it
	// reaches the session's client or history.
	Look func(h RunHost, args any) string
}

// ParseNone is the Parse of command name, which takes no arguments. Its
// args are nil.
func ParseNone(name string) func(rest string) (any, string, bool) {
	return func(rest string) (any, string, bool) {
		if rest != "" {
			return nil, "/" + name + " takes no arguments", false
		}
		return nil, "", false
	}
}

// ParseWord is the Parse of a command that takes one word (an id, a
// name), its args, a string; problem says what it needs.
func ParseWord(problem string) func(rest string) (any, string, bool) {
	return func(rest string) (any, string, bool) {
		if rest == "" || strings.ContainsAny(rest, " \t") {
			return nil, problem, false
		}
		return rest, "", false
	}
}

// ParseRest is the Parse of a command whose arguments are the rest of
// the line, as written (a string, maybe empty).
func ParseRest(rest string) (any, string, bool) { return rest, "", false }
