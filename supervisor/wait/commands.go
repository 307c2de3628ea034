package wait

import "shellagent/supervisor/work"

// Commands are /wait, the entry of package supervisor's command table:
// its args are a *Spec (Parse), and it holds the foreground (Start).
func Commands() []work.Command {
	return []work.Command{{
		Name: "wait", Syntax: "ID [PATTERN] [--timeout DUR] [--new]",
		Parse: func(rest string) (any, string, bool) {
			spec, problem := Parse(rest)
			return spec, problem, false
		},
		Hold: func(h work.RunHost, t work.Turn, args any) {
			Start(h, t, args.(*Spec)) // Safe: Parse made it.
		},
		Description: "Wait until a terminal prints a matching line, a port accepts connections, a URL answers, or the terminal exits",
		Hint:        "terminal id and what to wait for, e.g. term_1 'ready on' or term_1 :3000",
		Usage:       "/wait ID [PATTERN] [--timeout DUR] [--new], e.g. /wait term_1 'ready on', /wait term_1 :3000 or /wait term_1 http://localhost:3000/ (PATTERN: a regular expression, :PORT or an http:// URL; none waits for the exit; DUR at most 1h, 5m if omitted; --new ignores what was printed before)",
	}}
}
