package jobs

import (
	"time"

	"shellagent/supervisor/work"
)

// Args are the arguments of /after and /every: the delay, and the
// command line to run after it, or every delay.
type Args struct {
	Delay time.Duration
	Line  string
}

// Commands are /after and /every, the entries of package supervisor's
// command table.
func Commands() []work.Command {
	return []work.Command{
		{
			Name: "after", Syntax: "DUR CMD", Parse: parse(false), Line: line, Act: schedule(false), Lists: true,
			Description: "Run a command once, after a delay",
			Hint:        "delay and command, e.g. 5m make test",
			Usage:       "/after DUR CMD, e.g. /after 5m make test (DUR in Go syntax: 90s, 5m, 1h30m)",
		},
		{
			Name: "every", Syntax: "DUR CMD", Parse: parse(true), Line: line, Act: schedule(true), Lists: true,
			Description: "Run a command repeatedly, every interval, until stopped",
			Hint:        "interval and command, e.g. 30s git fetch",
			Usage:       "/every DUR CMD, e.g. /every 30s git fetch (DUR in Go syntax, at least 1s)",
		},
	}
}

// parse reads the Args of /after, or of /every (every).
func parse(every bool) func(rest string) (any, string, bool) {
	return func(rest string) (any, string, bool) {
		d, line, problem := Parse(every, rest)
		return Args{Delay: d, Line: line}, problem, false
	}
}

// line is the command line of /after's or /every's Args.
func line(args any) string { return args.(Args).Line } // Safe: parse made them.

// schedule serves /after, or /every (every), with its Args (Schedule).
func schedule(every bool) func(work.RunHost, any) {
	return func(h work.RunHost, args any) {
		a := args.(Args) // Safe: parse made them.
		Schedule(h, a.Line, a.Delay, every)
	}
}
