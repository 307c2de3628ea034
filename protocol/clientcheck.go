package protocol

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"shellagent/acp"
)

// ClientViolation is a message by which a client broke a client-side rule.
type ClientViolation struct {
	Rule      string // one of the rule constants below
	SessionID string // the session it concerns; "" when it names none
	Detail    string // what the client sent, in a few words
}

// The client-side rules ClientChecks checks (ClientViolation.Rule).
const (
	// UnsentResponse: a response whose id is no request the agent sent.
	UnsentResponse = "unsent-response"
	// SecondResponse: a response to a request the client already answered.
	SecondResponse = "second-response"
	// WithdrawnAnswer: a permission request the agent withdrew with
	// $/cancel_request, answered with a selected option more than
	// withdrawRace after the withdrawal.
	WithdrawnAnswer = "withdrawn-answer"
	// ReusedID: a request whose id is that of a request of the client
	// still waiting for its answer.
	ReusedID = "reused-id"
	// EmptyPrompt: a session/prompt whose prompt is an empty array.
	EmptyPrompt = "empty-prompt"
)

// withdrawRace is how long after withdrawing a request ClientChecks takes
// an answer with a selected option for one that crossed the withdrawal on
// the wire, not for a client that ignored it.
const withdrawRace = time.Second

// keepAnswered is how many answered requests of the agent ClientChecks
// remembers, to tell a second response from one to a request never sent.
const keepAnswered = 64

// ClientChecks is the Observer of one connection that checks its client
// against the client-side rules only the connection sees (a response to
// a request the agent never sent, a request id still in use, ...), and
// reports each violation to the function it was made with.
type ClientChecks struct {
	report func(Client, ClientViolation)

	mu       sync.Mutex
	open     map[string]*askedRequest // the agent's requests not answered, by id
	answered []*askedRequest          // oldest first, at most keepAnswered
}

// askedRequest is a request the agent sent.
type askedRequest struct {
	id        string
	session   string
	withdrawn time.Time // when $/cancel_request withdrew it; zero if it did not
}

var _ Observer = (*ClientChecks)(nil)

// NewClientChecks returns the checks of one connection, which report each
// violation to report, on the connection's read loop: it must return
// promptly.
func NewClientChecks(report func(Client, ClientViolation)) *ClientChecks {
	return &ClientChecks{report: report, open: make(map[string]*askedRequest)}
}

// Asked implements Observer.
func (k *ClientChecks) Asked(id, sessionID string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.open[id] = &askedRequest{id: id, session: sessionID}
}

// Withdrew implements Observer.
func (k *ClientChecks) Withdrew(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if a := k.open[id]; a != nil {
		a.withdrawn = time.Now()
	}
}

// Answered implements Observer: a response is checked against the
// requests the agent sent.
func (k *ClientChecks) Answered(c Client, id string, result *json.RawMessage) {
	k.mu.Lock()
	a := k.open[id]
	var again *askedRequest
	if a != nil {
		delete(k.open, id)
		k.answered = append(k.answered, a)
		if len(k.answered) > keepAnswered {
			k.answered = slices.Delete(k.answered, 0, 1)
		}
	} else if i := slices.IndexFunc(k.answered, func(a *askedRequest) bool { return a.id == id }); i >= 0 {
		again = k.answered[i]
	}
	k.mu.Unlock()
	switch {
	case again != nil:
		k.report(c, ClientViolation{Rule: SecondResponse, SessionID: again.session, Detail: "a second response to " + id})
	case a == nil:
		k.report(c, ClientViolation{Rule: UnsentResponse, Detail: "a response to " + id + ", which the agent never sent"})
	case !a.withdrawn.IsZero() && time.Since(a.withdrawn) > withdrawRace:
		if option := selectedOption(result); option != "" {
			k.report(c, ClientViolation{Rule: WithdrawnAnswer, SessionID: a.session,
				Detail: fmt.Sprintf("the withdrawn request %s answered with the selected option %q", id, option)})
		}
	}
}

// selectedOption returns the optionId of a permission response that
// selected one, or "".
func selectedOption(result *json.RawMessage) string {
	if result == nil {
		return ""
	}
	var r acp.PermissionResponse
	if json.Unmarshal(*result, &r) != nil || r.Outcome.Outcome != "selected" {
		return ""
	}
	return cmp.Or(r.Outcome.OptionID, "(none)")
}

// Requested implements Observer: it reports a request whose id is still
// in use by another, and a session/prompt with an empty prompt.
func (k *ClientChecks) Requested(c Client, method, id string, params *json.RawMessage, inUse bool) {
	var p struct {
		SessionID string            `json:"sessionId"`
		Prompt    []json.RawMessage `json:"prompt"`
	}
	if params != nil {
		_ = json.Unmarshal(*params, &p) // Best effort: the Conn says what is wrong with bad params.
	}
	if inUse {
		k.report(c, ClientViolation{Rule: ReusedID, SessionID: p.SessionID,
			Detail: fmt.Sprintf("%s with the id %s of a request still waiting for its answer", method, id)})
	}
	if method == "session/prompt" && p.Prompt != nil && len(p.Prompt) == 0 {
		k.report(c, ClientViolation{Rule: EmptyPrompt, SessionID: p.SessionID, Detail: "session/prompt with an empty prompt array"})
	}
}
