package scenario

import (
	"context"
	"errors"
	"fmt"
	"time"

	"shellagent/acp"
)

// Probe is the background item of a type no client knows: the schema
// reserves types that start with "_" for extensions.
var Probe = acp.BackgroundItem{Type: "_shellagent_probe"}

// UnknownStatus is the tool call status no client knows.
const UnknownStatus = "_shellagent_waiting"

// UnknownState is the session state no client knows.
const UnknownState = "_shellagent_probe"

// Commands the scenarios run. A gated one waits, silent, for Open.
const (
	silentCommand = "sleep 30"
	gatedCommand  = `until [ -e "$SHELLAGENT_GATE" ]; do sleep 0.02; done; echo "ended on its own"`
	// codexCommand gives the agent 100 ms to list its terminal before its
	// first output, so that the transcript's order is the same every run
	// (the output may legally come first; the list is sent once the
	// launch is done, and the output streams from the announcement on).
	codexCommand = `sleep 0.1; echo "working; this tool call stays in_progress while it runs"; ` + gatedCommand
	failCommand  = `echo "this command fails"; exit 3`
	replaceLine  = `printf 'before the snapshot\n'; until [ -e "$SHELLAGENT_GATE" ]; do sleep 0.02; done; printf 'after the snapshot\n'`
	followUpLine = `echo "follow-up work"`
	unforeseen   = `echo "an unforeseen follow-up"`
	neverRuns    = `echo "never runs: this wakeup is cancelled first"`
)

// quietGap is how long after the list empties the quiet-grace scenario
// starts its follow-up.
const quietGap = 500 * time.Millisecond

func toolCall(id, title, status string) *acp.ToolCallUpdate {
	return &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: id, Title: title, Kind: "other", Status: status}
}

func status(id, s string) *acp.ToolCallUpdate {
	return &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: id, Status: s}
}

func listedCall(id string) acp.BackgroundItem {
	return acp.BackgroundItem{Type: "tool_call", ToolCallID: id}
}

func caps(terminal bool, id string, c acp.Capabilities) acp.Update {
	if terminal {
		return &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: id, Capabilities: c}
	}
	return &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: id, Capabilities: c}
}

// runListed runs a silent command in the background.
func runListed(st Stage) (Command, error) { return st.Run(silentCommand, How{Background: true}) }

// stopAndWait stops c and waits for its exit.
func stopAndWait(c Command) error {
	c.Stop()
	return c.WaitExit()
}

// All are the scenarios, in the order /scenario lists them and
// docs/client-checklist.md has them.
var All = []Scenario{
	{
		Name:   "unknown-item",
		Sends:  "A background list whose only item has a type no client knows, {\"type\":\"_shellagent_probe\"}, on the idle snapshot that ends the turn; then a snapshot that removes it.",
		Rule:   "Unknown items still count. An item with an unknown type does not invalidate the list. It still means background work is running, even when the Client cannot show what it is, so a list of only unknown items is not empty.",
		Source: "RFD \"The background list on state snapshots\"; schema BackgroundWork",
		Expect: "counts one piece of background work while the probe is listed and does not call the session quiet; calls it quiet once the list is [].",
		Play: func(st Stage) error {
			st.List(Probe)
			st.End(acp.StopEndTurn, nil)
			st.Hold()
			st.List()
			return nil
		},
	},
	{
		Name:   "omitted-background",
		Sends:  "A background terminal (sleep 30), listed; then an idle snapshot that leaves the background list out; then the list again, the terminal's stop and [].",
		Rule:   "Omitted or null means the agent is not reporting background work. It does not mean \"nothing is running\". [...] If a later snapshot omits it anyway, or it is malformed, the Client treats background work as unknown until a list is reported again: it does not keep the previous list, consider the session quiet, or treat unfinished tool calls or running terminals as abandoned.",
		Source: "RFD \"The background list on state snapshots\"; schema IdleStateUpdate.background",
		Expect: "while the list is left out: background work is unknown (neither the old list nor none), the session is not quiet, and the terminal is still running (not abandoned); then the terminal is listed again, exits, and the session is quiet.",
		Play: func(st Stage) error {
			w, err := runListed(st)
			if err != nil {
				return err
			}
			st.End(acp.StopEndTurn, nil)
			st.Report(Snapshot{Unreported: true})
			st.Hold()
			st.Report(Snapshot{})
			return stopAndWait(w)
		},
	},
	{
		Name:   "paused",
		Sends:  "A real watch (/watch) that goes in_progress, paused, in_progress, paused, and is cancelled while paused, listed throughout, beside a real scheduled wakeup (pending, listed); the turn ends while both are listed and the watch is paused.",
		Rule:   "in_progress and paused may alternate any number of times. A paused tool call reaches a final status when it is cancelled, fails, or is discarded. [...] Paused and pending tool calls stay listed. A pending or paused tool call is live background work: closing the session discards it, and the Client should not treat it as abandoned. [...] When background only contains pending or paused tool calls, the session is idle with work scheduled or suspended, and nothing is running right now.",
		Source: "RFD \"Tool call statuses for background work\" and \"The background list on state snapshots\"; schema ToolCallStatus (paused)",
		Expect: "shows the watch paused, then watching again, never finished or abandoned while it is listed; while the session is idle with only a paused and a pending tool call listed, shows it as idle with work suspended and scheduled (not quiet, nothing running right now); then the watch cancelled from paused, and the wakeup cancelled.",
		Play: func(st Stage) error {
			job, err := st.Schedule(neverRuns)
			if err != nil {
				return err
			}
			watch, err := st.Watch(`echo "a change"`)
			if err != nil {
				return err
			}
			watch.Pause(true)
			st.End(acp.StopEndTurn, nil)
			st.Hold()
			watch.Pause(false)
			st.Hold()
			watch.Pause(true)
			st.Hold()
			watch.Cancel()
			job.Cancel()
			return nil
		},
	},
	{
		Name:   "unknown-status",
		Sends:  "A made-up listed tool call whose status becomes \"_shellagent_waiting\", a status no client knows, while the session is idle; then completed.",
		Rule:   "Clients treat a tool call with an unrecognized status as still in progress.",
		Source: "schema ToolCallStatus (other)",
		Expect: "shows the tool call as still in progress (not finished, not failed, not abandoned) while its status is _shellagent_waiting, and counts it as running background work; then completed.",
		Play: func(st Stage) error {
			id := st.ToolCallID()
			st.Send(toolCall(id, "A made-up tool call with a status of its own", acp.StatusInProgress))
			st.List(listedCall(id))
			st.Send(status(id, UnknownStatus))
			st.End(acp.StopEndTurn, nil)
			st.Hold()
			st.Send(status(id, acp.StatusCompleted))
			st.List()
			return nil
		},
	},
	{
		Name:   "capabilities",
		Sends:  "A background terminal and a scheduled wakeup, both advertising cancel; then their capabilities replaced by {} (an object without cancel), by {\"cancel\":{}} again, cleared with null, and advertised again before they are stopped.",
		Rule:   "capabilities is a nullable patch: omitted leaves it unchanged, null clears it, and an object replaces the whole previous value. [...] The Client MUST NOT send it unless the tool call currently advertises capabilities.cancel.",
		Source: "RFD \"Cancellable tool calls\" and \"Cancellable terminals\"; schema TerminalUpdate.capabilities, ToolCallUpdate.capabilities",
		Expect: "offers to stop the terminal and the wakeup only while they advertise cancel: not after {} (the object replaces {\"cancel\":{}} whole), again after {\"cancel\":{}}, not after null; it sends no terminal/cancel or tool_call/cancel meanwhile (with client_checks on, shellagent would say so).",
		Play: func(st Stage) error {
			w, err := runListed(st)
			if err != nil {
				return err
			}
			job, err := st.Schedule(neverRuns)
			if err != nil {
				return err
			}
			st.End(acp.StopEndTurn, nil)
			for _, c := range []acp.Capabilities{acp.Capabilities(`{}`), acp.CapsCancel, acp.CapsNone, acp.CapsCancel} {
				st.Hold()
				st.Send(caps(true, w.Terminal(), c))
				st.Send(caps(false, job.ID(), c))
			}
			job.Cancel()
			return stopAndWait(w)
		},
	},
	{
		Name:   "codex-style",
		Sends:  "A background command whose tool call stays in_progress while its terminal is listed, as Codex's command items do; the turn ends while it runs; then it ends on its own and its tool call completes.",
		Rule:   "The tool call that started it keeps referencing the terminal [...] it may complete once the process has been handed off, as Claude Code's Bash tool does, or stay in_progress until the process exits, as Codex's command items do. Either way, the terminal is what is listed. [...] A tool call that references a listed terminal is live, even though it is not listed itself.",
		Source: "RFD \"Background work is terminals, tool calls, and subagents\" and \"The background list on state snapshots\"",
		Expect: "counts one piece of background work (the terminal, not also its tool call), shows the tool call in progress and live although it is not listed, while the session is idle; then the exit, the tool call completed, and [].",
		V1:     true,
		Play: func(st Stage) error {
			w, err := st.Run(codexCommand, How{Background: true, Codex: true, Gated: true})
			if err != nil {
				return err
			}
			if err := w.WaitOutput("working"); err != nil {
				return err
			}
			st.End(acp.StopEndTurn, nil)
			st.Hold()
			w.Open()
			return w.WaitExit()
		},
	},
	{
		Name:   "stale-tool-call",
		Sends:  "A made-up tool call left in_progress and a made-up terminal without exitStatus, neither listed, and the idle snapshot with []; then the terminal's exitStatus {} and the tool call cancelled.",
		Rule:   "A Client MAY treat a pending, in_progress, or paused tool call, or a terminal without exitStatus, that is not in the latest reported background list as abandoned once the session is idle. [...] The presence of this object [exitStatus] marks the terminal as exited, even when neither an exit code nor a signal is known.",
		Source: "RFD \"The background list on state snapshots\"; schema TerminalExitStatus",
		Expect: "may show the tool call and the terminal as abandoned (stop their spinners) once the idle [] snapshot arrives; shows the terminal exited, with no code or signal, after exitStatus {}.",
		Play: func(st Stage) error {
			call, term := st.ToolCallID(), st.TerminalID()
			st.Send(toolCall(call, "A made-up tool call that nobody finishes", acp.StatusInProgress))
			st.Send(&acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: term, Command: "(a made-up terminal: no process behind it)"})
			st.End(acp.StopEndTurn, nil)
			st.Hold()
			st.Send(&acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: term, ExitStatus: &acp.ExitStatus{}, Capabilities: acp.CapsNone})
			u := status(call, acp.StatusCancelled)
			u.Content = []acp.ToolCallContent{acp.TextContent("Abandoned: the scenario is over.")}
			st.Send(u)
			return nil
		},
	},
	{
		Name:   "error-stop-reason",
		Sends:  "A background terminal (listed), then a foreground command that fails, and the idle snapshot with stopReason \"error\" and its error; the terminal runs on, listed, until it is stopped.",
		Rule:   "When foreground work fails with the error stop reason, the unfinished tool calls the Agent gives a final status are those of the failed work. Listed background terminals and tool calls, and tool calls that reference a listed terminal, keep running.",
		Source: "RFD \"Cancellation, close, and resume\"; schema IdleStateUpdate (error), ErrorStopReason",
		Expect: "shows the turn as failed, with the error's message, and the foreground command's tool call failed, while the background terminal stays running and listed (not failed or cancelled with the turn). In ACP v1: the prompt is answered with a JSON-RPC error, and the background terminal's output goes on.",
		V1:     true,
		Play: func(st Stage) error {
			bg, err := runListed(st)
			if err != nil {
				return err
			}
			fg, err := st.Run(failCommand, How{})
			if err != nil {
				return err
			}
			if err := fg.WaitExit(); err != nil {
				return err
			}
			st.End(acp.StopError, &acp.Error{Code: acp.CodeInternalError, Message: "the foreground work failed: its command exited with 3"})
			st.Hold()
			return stopAndWait(bg)
		},
	},
	{
		Name:   "replacement-snapshot",
		Sends:  "A foreground command that prints a line, then a terminal_update whose output is a replacement snapshot of everything it printed, then a second line and its exit.",
		Rule:   "An authoritative replacement snapshot of terminal output bytes.",
		Source: "schema TerminalUpdate.output, TerminalOutput",
		Expect: "replaces what it shows of the terminal with the snapshot rather than appending it: the terminal reads \"before the snapshot\" then \"after the snapshot\", each once. In ACP v1 (with _meta.terminal_output) the snapshot comes as a screen clear and the same bytes.",
		V1:     true,
		Play: func(st Stage) error {
			w, err := st.Run(replaceLine, How{Gated: true})
			if err != nil {
				return err
			}
			if err := w.WaitOutput("before the snapshot"); err != nil {
				return err
			}
			if err := w.Replace(); err != nil {
				return err
			}
			w.Open()
			return w.WaitExit()
		},
	},
	{
		Name:   "follow-up",
		Sends:  "A scheduled wakeup, listed while the session is idle; when it fires, the snapshot that removes it also reports running, and its command runs as new foreground work.",
		Rule:   "When the end of background work starts new foreground work, for example a follow-up response to a finished background task, the Agent SHOULD report running in the same snapshot that removes the item, or earlier. It SHOULD NOT send idle with an empty list followed immediately by running.",
		Source: "RFD \"The background list on state snapshots\"",
		Expect: "never shows the session quiet between the wakeup's end and its follow-up: the snapshot that removes the wakeup says running; then the follow-up's output and idle.",
		Play: func(st Stage) error {
			job, err := st.Schedule(followUpLine)
			if err != nil {
				return err
			}
			st.End(acp.StopEndTurn, nil)
			st.Hold()
			job.Fire()
			return st.Idle()
		},
	},
	{
		Name:   "quiet-grace",
		Sends:  "A background command that ends on its own, and the idle snapshot with [] (the session is quiet); half a second later, foreground work that no prompt asked for starts in the same session.",
		Rule:   "Quiet describes the session at that snapshot, not a promise that it will stay quiet. An Agent may not know ahead of time that finished work will start a follow-up. A Client that frees resources when a session becomes quiet SHOULD wait a short grace period after the snapshot that empties the list.",
		Source: "RFD \"The background list on state snapshots\" (Whether the session is quiet)",
		Expect: "does not free the session (or close it) the moment the list empties: it waits a grace period, and sees the new foreground work start 0.5s after.",
		Play: func(st Stage) error {
			w, err := st.Run(gatedCommand, How{Background: true, Gated: true})
			if err != nil {
				return err
			}
			st.End(acp.StopEndTurn, nil)
			st.Hold()
			w.Open()
			if err := w.WaitExit(); err != nil {
				return err
			}
			if err := pause(st, quietGap); err != nil {
				return err
			}
			if err := st.Begin(); err != nil {
				return err
			}
			fg, err := st.Run(unforeseen, How{})
			if err != nil {
				return err
			}
			if err := fg.WaitExit(); err != nil {
				return err
			}
			st.End(acp.StopEndTurn, nil)
			return nil
		},
	},
	{
		Name:   "unknown-state",
		Sends:  "A state_update whose state is \"_shellagent_probe\", a state no client knows, while the scenario's turn runs; then the idle snapshot that ends the turn.",
		Rule:   "Clients MUST NOT treat an unrecognized state as idle or present the previous state as confirmed, and show a generic busy state until a known state arrives.",
		Source: "schema StateUpdate (other)",
		Expect: "shows a generic busy state (neither idle nor a confirmed running) until the idle snapshot.",
		Play: func(st Stage) error {
			st.Report(Snapshot{State: UnknownState})
			st.Hold()
			return nil
		},
	},
	{
		Name:   "repeated-idle",
		Sends:  "The idle snapshot that ends the turn with stopReason end_turn, then the same snapshot again, stop reason included.",
		Rule:   "Repeated or resume snapshots may carry the last stop reason for context. They MUST NOT be counted as new completions, cancellations, or additional usage.",
		Source: "schema IdleStateUpdate; schema StateUpdate (Repeated snapshots are idempotent)",
		Expect: "counts one completed turn, not two: the second idle end_turn repeats the first.",
		Play: func(st Stage) error {
			st.End(acp.StopEndTurn, nil)
			st.Report(Snapshot{State: acp.StateIdle, StopReason: acp.StopEndTurn})
			return nil
		},
	},
	{
		Name:   "silent-terminal",
		Sends:  "A background terminal that prints nothing at all, listed while the session is idle, until it is stopped.",
		Rule:   "Output is not a liveness signal: a Client MUST NOT treat a terminal as hung or exited because its output is missing or stale. Only the background list and exitStatus say whether it is still running.",
		Source: "RFD \"Background work is terminals, tool calls, and subagents\"",
		Expect: "shows the terminal running (listed, no exitStatus) however long it stays silent; shows it exited only with its exitStatus.",
		Play: func(st Stage) error {
			w, err := runListed(st)
			if err != nil {
				return err
			}
			st.End(acp.StopEndTurn, nil)
			st.Hold()
			st.Hold()
			return stopAndWait(w)
		},
	},
	{
		Name:   "permission-cancel",
		Sends:  "Two permission requests: one for a made-up listed tool call (background work), one for a made-up foreground tool call (the turn is requires_action). It waits a minute for session/cancel; then it withdraws the foreground request, keeps the one for the listed work open for the hold (at least 1s), says what the client did with it meanwhile, and withdraws it.",
		Rule:   "Pending permission requests for listed work stay open. [...] On session/cancel, the Client answers with cancelled every pending request whose subject does not reference work in the latest background list, including requests without a subject.",
		Source: "RFD \"Cancellation, close, and resume\"; schema AgentRequest, RequestPermissionOutcome",
		Expect: "send session/cancel now. Then it answers the foreground request with cancelled (or once $/cancel_request withdraws it), and leaves the request for the listed tool call open until shellagent withdraws it; then answers that one cancelled too.",
		Play:   permissionCancel,
	},
	{
		Name:   "close",
		Sends:  "A background terminal, a scheduled wakeup and a made-up listed tool call with a permission request open, while the session is idle. It waits a minute for session/close; the close sends final updates for the real work only.",
		Rule:   "After a successful close, the Client SHOULD treat every listed tool call, and every tool call that references a listed terminal, that has not reported a final status as cancelled, and every listed terminal that has not reported exitStatus as exited with no known exit status. It MUST answer any pending permission request for listed work with cancelled. [...] The Agent MAY send final updates for listed work before responding, but doesn't have to.",
		Source: "RFD \"Cancellation, close, and resume\"",
		Expect: "warns that closing will stop 3 pieces of background work; close the session now. After the close response it shows the made-up tool call cancelled (no update says so) and answers its permission request with cancelled; the terminal and the wakeup get their final updates.",
		Play:   closeScenario,
	},
	{
		Name:   "cancel-race",
		Sends:  "A background terminal and a made-up listed tool call, both advertising cancel. It waits a minute for terminal/cancel and tool_call/cancel; each is accepted and each work then ends on its own first, as when a cancel races the natural end.",
		Rule:   "The Agent responds with an empty result once it has accepted the cancellation. The response does not mean the work has stopped. The Agent confirms that with a tool_call_update to a final status, normally cancelled, and may send completed or failed if the work finished first. [...] The response does not mean the process has stopped. The Agent confirms that with a terminal_update that sets exitStatus.",
		Source: "RFD \"Cancellable tool calls\" and \"Cancellable terminals\"",
		Expect: "cancel both now. It takes {} as accepted, not done; shows the terminal exited with exitCode 0 and no signal, and the tool call completed, not cancelled, without an error; a second cancel of either is refused (-32602, already over), which it shows as nothing to stop.",
		Play:   cancelRace,
	},
	{
		Name:    "malformed-background",
		Sends:   "A background terminal, listed; then an idle snapshot whose background list holds {\"type\":\"terminal\"} without a terminalId; then the list again, the terminal's stop and [].",
		Rule:    "If an item with a recognized type fails validation, the entire background field is treated as unreported. That way a damaged list never makes running work look abandoned.",
		Source:  "RFD \"Schema\" (background on state updates); schema IdleStateUpdate.background (A malformed list is treated as not reported)",
		Expect:  "treats background work as unknown while the list is malformed: the terminal is still running, not abandoned, and the session is not quiet; then the terminal is listed again, exits, and the session is quiet.",
		Invalid: true,
		Play: func(st Stage) error {
			w, err := runListed(st)
			if err != nil {
				return err
			}
			st.End(acp.StopEndTurn, nil)
			st.Report(Snapshot{Raw: []byte(`[{"type":"terminal"}]`)})
			st.Hold()
			st.Report(Snapshot{})
			return stopAndWait(w)
		},
	},
}

// permissionCancel plays permission-cancel.
func permissionCancel(st Stage) error {
	cancelled := st.SessionCancel()
	bg, fg := st.ToolCallID(), st.ToolCallID()
	st.Send(toolCall(bg, "Made-up background work that waits for permission", acp.StatusPending))
	st.List(listedCall(bg))
	bgAnswer, withdrawBg := st.Ask(permission(bg, "Let the made-up background work go on?"))
	st.Send(toolCall(fg, "Made-up foreground work that waits for permission", acp.StatusPending))
	st.Report(Snapshot{State: acp.StateRequiresAction})
	_, withdrawFg := st.Ask(permission(fg, "Let the made-up foreground work go on?"))
	err := await(st, cancelled, AwaitClient)
	withdrawFg()
	st.Send(final(fg, acp.StatusCancelled, "Cancelled by session/cancel."))
	why := "Withdrawn: the scenario is over."
	switch {
	case errors.Is(err, errTimeout):
		st.Say("No session/cancel came within a minute; the scenario withdraws both requests.")
		st.End(acp.StopEndTurn, nil)
		st.Hold()
	case err != nil:
		return err
	default:
		st.End(acp.StopCancelled, nil)
		says, answered, err := verdict(st, bgAnswer)
		if err != nil {
			return err
		}
		st.Say(says)
		if answered {
			why = "Cancelled: the scenario is over."
		}
	}
	withdrawBg()
	st.Send(final(bg, acp.StatusCancelled, why))
	st.List()
	return nil
}

// verdict waits for the client's answer to the request for listed work
// after session/cancel, for as long as the scenario keeps that request
// open (the hold, at least AnswerWindow), and says what the client did
// meanwhile. It reports whether the request ended before the scenario
// withdraws it: the client answered, or the request failed.
func verdict(st Stage, answer <-chan Answer) (says string, ended bool, err error) {
	open := max(st.HoldTime(), AnswerWindow)
	t := time.NewTimer(open)
	defer t.Stop()
	select {
	case a := <-answer:
		switch {
		case a.Err != nil:
			return fmt.Sprintf("The request for the listed work got no answer: %v.", a.Err), true, nil
		case a.Outcome == "cancelled":
			return "The client answered the request for the listed work with cancelled after session/cancel; the RFD says such a request stays open: session/cancel does not cover listed work.", true, nil
		}
		return fmt.Sprintf("The client answered the request for the listed work (%s %s) after session/cancel, leaving it open until then, as it should.", a.Outcome, a.OptionID), true, nil
	case <-t.C:
		return fmt.Sprintf("The request for the listed work stayed open for %s after session/cancel, as it should: session/cancel does not cover listed work. The scenario withdraws it now.", open), false, nil
	case <-st.Context().Done():
		return "", false, context.Cause(st.Context())
	}
}

func permission(call, title string) *acp.PermissionRequest {
	return &acp.PermissionRequest{
		Title:   title,
		Subject: &acp.PermissionSubject{Type: "command", Command: "(made-up work of /scenario)", ToolCallID: call},
		Options: []acp.PermissionOption{
			{OptionID: "allow", Name: "Go on", Kind: "allow_once"},
			{OptionID: "reject", Name: "Don't", Kind: "reject_once"},
		},
	}
}

func final(id, s, why string) *acp.ToolCallUpdate {
	u := status(id, s)
	u.Content = []acp.ToolCallContent{acp.TextContent(why)}
	return u
}

// closeScenario plays close: it returns at once when the session closes,
// leaving its made-up tool call and its permission request as they are.
func closeScenario(st Stage) error {
	w, err := runListed(st)
	if err != nil {
		return err
	}
	job, err := st.Schedule(neverRuns)
	if err != nil {
		return err
	}
	p := st.ToolCallID()
	st.Send(toolCall(p, "Made-up background work that the close discards without a word", acp.StatusInProgress))
	st.List(listedCall(p))
	st.Ask(permission(p, "Let the made-up background work go on?"))
	st.End(acp.StopEndTurn, nil)
	if err := await(st, nil, AwaitClient); !errors.Is(err, errTimeout) {
		return err // the close, as asked
	}
	st.Say("No session/close came within a minute; the scenario ends what it started.")
	job.Cancel()
	return stopAndWait(w)
}

// cancelRace plays cancel-race.
func cancelRace(st Stage) error {
	w, err := st.Run(gatedCommand, How{Background: true, Gated: true})
	if err != nil {
		return err
	}
	termCancel := st.Intercept(w.Terminal())
	c := st.ToolCallID()
	u := toolCall(c, "Made-up background work that finishes as it is cancelled", acp.StatusInProgress)
	u.Capabilities = acp.CapsCancel
	st.Send(u)
	st.List(listedCall(c))
	callCancel := st.Intercept(c)
	st.End(acp.StopEndTurn, nil)
	deadline := time.Now().Add(AwaitClient)
	for termCancel != nil || callCancel != nil {
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-termCancel:
			termCancel = nil
			w.Open()
			if err := w.WaitExit(); err != nil {
				t.Stop()
				return err
			}
		case <-callCancel:
			callCancel = nil
			done := final(c, acp.StatusCompleted, "Finished before the cancel took effect.")
			done.Capabilities = acp.CapsNone
			st.Send(done)
			st.List()
		case <-t.C:
			st.Say("No cancel came within a minute for what is still listed; the scenario ends it.")
			t.Stop()
			return nil
		case <-st.Context().Done():
			t.Stop()
			return context.Cause(st.Context())
		}
		t.Stop()
	}
	return nil
}
