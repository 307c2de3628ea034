package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"shellagent/acp"
)

// The turn of shellagent up and down: the prompt, and what a stop signal
// does while it waits for the answer.

// interruptSignals interrupt up and down while they wait for their
// prompt's answer (prompt), unless the process was started with them
// ignored (nohup, a background job of a script).
var interruptSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// cancelWait is how long an interrupted up or down waits for the daemon
// to say that its turn is over.
const cancelWait = 5 * time.Second

// prompt runs line as a prompt and returns what the agent said in its
// turn, once the turn is over.
//
// A stop signal (interruptSignals) before then withdraws the prompt
// (promptTurn.withdraw), waits at most cancelWait for the daemon to say
// how its turn ended, and returns an *interrupted that says it. From
// that signal on, the signals have their default effect again: a second
// one ends the process at once.
func (sc *stackClient) prompt(line string) (string, error) {
	sigs := make(chan os.Signal, 1)
	if caught := notIgnored(interruptSignals); len(caught) > 0 {
		signal.Notify(sigs, caught...) // Notify without signals would relay them all
	}
	defer signal.Stop(sigs)
	t := &promptTurn{sc: sc}
	if err := t.send(line); err != nil {
		return "", err
	}
	var timeout <-chan time.Time
	for {
		select {
		case m, ok := <-sc.in:
			if !ok {
				return "", t.lost(sc.inErr)
			}
			if said, over, err := t.take(m); over {
				return said, err
			}
		case sig := <-sigs:
			signal.Stop(sigs)
			t.intr = &interrupted{sig: sig.(syscall.Signal)}
			if err := t.withdraw(); err != nil {
				return "", t.lost(err)
			}
			timeout = time.After(cancelWait)
		case <-timeout:
			return "", t.intr
		}
	}
}

// notIgnored returns the signals of sigs that the process was not
// started with ignored.
func notIgnored(sigs []os.Signal) []os.Signal {
	var caught []os.Signal
	for _, s := range sigs {
		if !signal.Ignored(s) {
			caught = append(caught, s)
		}
	}
	return caught
}

// A promptTurn is prompt's view of its prompt and of the turn it runs.
type promptTurn struct {
	sc       *stackClient
	id       int          // the prompt's request id
	inserted bool         // the prompt was answered: its turn runs
	said     []string     // what the agent said in the turn
	intr     *interrupted // the stop signal, once one came
}

// send sends the prompt line.
func (t *promptTurn) send(line string) error {
	t.sc.id++
	t.id = t.sc.id
	err := t.sc.enc.Encode(map[string]any{"jsonrpc": "2.0", "id": t.id, "method": "session/prompt",
		"params": map[string]any{"sessionId": t.sc.sid, "prompt": []map[string]string{{"type": "text", "text": line}}}})
	if err != nil {
		return fmt.Errorf("session/prompt: %w", closedConn(err))
	}
	return nil
}

// take serves m, a message of the daemon. over says that the turn is
// over for this command, and that said and err are prompt's answer.
func (t *promptTurn) take(m *incoming) (said string, over bool, err error) {
	sc := t.sc
	switch {
	case sc.taken(m):
		return "", true, errTaken
	case m.Method == "" && string(m.ID) == fmt.Sprint(t.id):
		return t.answered(m)
	case !t.inserted:
		sc.handle(m, nil) // the turn before this one's
		return "", false, nil
	}
	sc.handle(m, &t.said)
	if u := m.Params.Update; m.Params.SessionID == sc.sid && u["sessionUpdate"] == acp.KindState {
		if reason, _ := u["stopReason"].(string); reason != "" {
			return t.ended(reason)
		}
	}
	return "", false, nil
}

// answered serves the answer to the prompt: the prompt is inserted and
// its turn runs, or (an error) it does not run.
func (t *promptTurn) answered(m *incoming) (string, bool, error) {
	switch {
	case m.Error != nil && t.intr != nil && m.Error.Code == acp.CodeRequestCancelled:
		t.intr.outcome = turnWithdrawn
		return "", true, t.intr
	case m.Error != nil:
		return "", true, fmt.Errorf("session/prompt: %s", m.Error.Message)
	}
	t.inserted = true
	if t.intr != nil {
		// Inserted before its withdrawal came: it is its turn that
		// session/cancel ends now.
		if err := t.withdraw(); err != nil {
			return "", true, t.lost(err)
		}
	}
	return "", false, nil
}

// ended serves the end of the turn, with its stop reason.
func (t *promptTurn) ended(stopReason string) (string, bool, error) {
	said := strings.Join(t.said, "\n")
	if t.intr == nil {
		return said, true, nil
	}
	t.intr.outcome, t.intr.said = turnAnswered, said
	if stopReason == acp.StopCancelled {
		t.intr.outcome = turnCancelled
	}
	return "", true, t.intr
}

// withdraw asks the daemon to drop the prompt. One that is held behind
// another turn (not inserted yet) is withdrawn by $/cancel_request,
// which leaves that turn alone (an editor's command, say). One whose
// turn runs is ended by session/cancel: for /up, /down and /restart
// that ends the wait alone, and the services go on (SPEC "Stacks"), the
// stops of /down included. Every turn of the session is this command's
// while it has the session, so that session/cancel ends no one else's.
func (t *promptTurn) withdraw() error {
	if t.inserted {
		return t.sc.notify("session/cancel", map[string]any{"sessionId": t.sc.sid})
	}
	return t.sc.notify("$/cancel_request", map[string]any{"requestId": t.id})
}

// lost is prompt's error when the connection ended (err): after a stop
// signal, the interruption, without word from the daemon.
func (t *promptTurn) lost(err error) error {
	if t.intr == nil {
		return err
	}
	t.intr.err = err
	return t.intr
}

// notify sends the notification method.
func (sc *stackClient) notify(method string, params any) error {
	if err := sc.enc.Encode(map[string]any{"jsonrpc": "2.0", "method": method, "params": params}); err != nil {
		return fmt.Errorf("%s: %w", method, closedConn(err))
	}
	return nil
}

// How the turn of an interrupted command ended, as the daemon said
// within cancelWait.
type turnOutcome int

const (
	turnNoWord    turnOutcome = iota // nothing within cancelWait, or the connection ended
	turnWithdrawn                    // the prompt was withdrawn before it ran: it did nothing
	turnCancelled                    // the turn ended cancelled: the wait stopped, the services go on
	turnAnswered                     // the turn ended on its own first, with its answer
)

// An interrupted is prompt's error when a stop signal came before the
// turn was over.
type interrupted struct {
	sig     syscall.Signal
	outcome turnOutcome
	said    string // the answer, if turnAnswered
	err     error  // why the connection ended, if it did
}

func (e *interrupted) Error() string { return "interrupted by " + e.sig.String() }

// report prints, on stderr, what became of the command name that e
// interrupted (and, if its turn ended on its own first, the answer as
// the command prints it), then ends the process by e's signal
// (exitBySignal).
func (e *interrupted) report(name string) int {
	prefix := "shellagent " + name + ": interrupted"
	switch e.outcome {
	case turnAnswered:
		printAnswer(name, e.said)
	case turnWithdrawn:
		fmt.Fprintf(os.Stderr, "%s before /%s ran (it waited for the command before it in the session): it did nothing.\n", prefix, name)
	case turnCancelled:
		goOn := "The services go on as they are"
		if name == "down" {
			goOn = "The services being stopped go on stopping"
		}
		fmt.Fprintf(os.Stderr, "%s: no longer waiting. %s: shellagent status shows where they stand.\n", prefix, goOn)
	default:
		why := fmt.Sprintf("within %v", cancelWait)
		if e.err != nil {
			why = fmt.Sprintf("(%v)", e.err)
		}
		fmt.Fprintf(os.Stderr, "%s; the daemon did not say %s that it stopped waiting: shellagent status shows where the services stand.\n", prefix, why)
	}
	return exitBySignal(e.sig)
}

// exitBySignal ends the process by sig, as the signal does where it is
// not caught, so that the shell or script that runs the command knows it
// was interrupted (and a script stops): its status is 128+sig, 130 for
// SIGINT, 143 for SIGTERM. It returns that status for the caller to exit
// with should the signal not end the process at once.
func exitBySignal(sig syscall.Signal) int {
	signal.Reset(sig)
	if err := syscall.Kill(os.Getpid(), sig); err == nil {
		time.Sleep(time.Second) // the signal ends the process meanwhile
	}
	return 128 + int(sig)
}
