package watch

import "shellagent/supervisor/work"

// Commands are /watch, /pause and /resume, the entries of package
// supervisor's command table: /watch's args are a *Spec (Parse), the
// others' a tool call id.
func Commands() []work.Command {
	return []work.Command{
		{
			Name: "watch", Syntax: "PATH CMD", Lists: true,
			Parse: func(rest string) (any, string, bool) {
				spec, problem := Parse(rest)
				return spec, problem, false
			},
			Act: func(h work.RunHost, args any) {
				Start(h, args.(*Spec)) // Safe: Parse made it.
			},
			Description: "Run a command each time files under a path change",
			Hint:        "path and command, e.g. src make test",
			Usage:       "/watch PATH CMD, e.g. /watch src make test",
		},
		{
			Name: "pause", Syntax: "ID", Now: true, Parse: work.ParseWord("/pause needs exactly one watch's tool call id"),
			Act:         func(h work.RunHost, id any) { Pause(h, id.(string)) }, // Safe: ParseWord's.
			Description: "Pause a watch: changes run nothing until it is resumed",
			Hint:        "watch tool call id, e.g. call_2",
			Usage:       "/pause ID, e.g. /pause call_2",
		},
		{
			Name: "resume", Syntax: "ID", Now: true, Parse: work.ParseWord("/resume needs exactly one watch's tool call id"),
			Act:         func(h work.RunHost, id any) { Resume(h, id.(string)) }, // Safe: ParseWord's.
			Description: "Resume a paused watch",
			Hint:        "watch tool call id, e.g. call_2",
			Usage:       "/resume ID, e.g. /resume call_2",
		},
	}
}
