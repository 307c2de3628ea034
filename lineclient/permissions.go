package lineclient

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"shellagent/acp"
)

// permissions answers the agent's session/request_permission requests as
// the mode says, and holds those that wait for the user's answer, oldest
// first. It belongs to the client's event loop.
type permissions struct {
	mode Permissions
	rpc  *conn
	p    *printer
	open []*permission
}

// permission is a permission request waiting for its answer.
type permission struct {
	id  json.RawMessage
	req permissionRequest
}

// waiting reports whether the next input line answers a request.
func (ps *permissions) waiting() bool {
	return ps.mode == PermissionsAsk && len(ps.open) > 0
}

// request takes a session/request_permission request: it is answered at
// once, or held for the user.
func (ps *permissions) request(m *message) {
	p := &permission{id: m.ID}
	if err := json.Unmarshal(m.Params, &p.req); err != nil || len(p.req.Options) == 0 {
		ps.rpc.replyError(m.ID, acp.CodeInvalidParams, "session/request_permission: params need a title and options")
		return
	}
	ps.p.note(describePermission(&p.req))
	switch ps.mode {
	case PermissionsAllow:
		ps.choose(p, "allow", "by --permissions allow")
	case PermissionsReject:
		ps.choose(p, "reject", "by --permissions reject")
	default:
		ps.open = append(ps.open, p)
		ps.p.note("answer with one of: " + optionNames(p.req.Options))
	}
}

// describePermission says what a permission request asks.
func describePermission(r *permissionRequest) string {
	text := "permission requested: " + r.Title
	if s := r.Subject; s != nil && s.Type == "command" {
		text += fmt.Sprintf(" (run %q in %s", s.Command, s.Cwd)
		if refs := s.refs(); len(refs) > 0 {
			text += " for " + strings.Join(refs, ", ")
		}
		text += ")"
	}
	return text
}

// optionNames lists the options of a request: "allow, reject".
func optionNames(opts []permissionOption) string {
	names := make([]string, len(opts))
	for i, o := range opts {
		names[i] = o.OptionID
	}
	return strings.Join(names, ", ")
}

// answer takes an input line as the answer to the oldest open request: an
// option id, or allow/yes/y, reject/no/n.
func (ps *permissions) answer(line string) {
	p := ps.open[0]
	word := strings.ToLower(strings.TrimSpace(line))
	switch word {
	case "y", "yes":
		word = "allow"
	case "n", "no":
		word = "reject"
	}
	for _, o := range p.req.Options {
		if o.OptionID == word {
			ps.open = ps.open[1:]
			ps.selectOption(p, o, "")
			return
		}
	}
	if word == "allow" || word == "reject" {
		ps.open = ps.open[1:]
		ps.choose(p, word, "")
		return
	}
	ps.p.note(fmt.Sprintf("%q is not an answer; answer with one of: %s", line, optionNames(p.req.Options)))
}

// choose answers with the first option of the wanted kind (allow_once,
// then allow_always; likewise for reject), or cancelled if there is none.
func (ps *permissions) choose(p *permission, want, why string) {
	for _, kind := range []string{want + "_once", want + "_always"} {
		for _, o := range p.req.Options {
			if o.Kind == kind {
				ps.selectOption(p, o, why)
				return
			}
		}
	}
	ps.cancel(p, "permission request answered cancelled: ")
}

func (ps *permissions) selectOption(p *permission, o permissionOption, why string) {
	ps.rpc.reply(p.id, map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": o.OptionID}})
	note := "answered " + o.OptionID
	if why != "" {
		note += " " + why
	}
	ps.p.note(note)
}

// cancel answers cancelled and notes why, followed by the request's title.
func (ps *permissions) cancel(p *permission, why string) {
	ps.rpc.reply(p.id, map[string]any{"outcome": map[string]string{"outcome": "cancelled"}})
	ps.p.note(why + p.req.Title)
}

// cancelAll answers every open request cancelled, except those for which
// keep reports true.
func (ps *permissions) cancelAll(keep func(*permission) bool) {
	ps.open = slices.DeleteFunc(ps.open, func(p *permission) bool {
		if keep != nil && keep(p) {
			return false
		}
		ps.cancel(p, "permission request answered cancelled: ")
		return true
	})
}

// withdrawn handles $/cancel_request: the agent no longer needs the
// answer; it is answered cancelled.
func (ps *permissions) withdrawn(params json.RawMessage) {
	var req struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &req) != nil {
		return
	}
	for i, p := range ps.open {
		if string(p.id) == string(req.RequestID) {
			ps.open = slices.Delete(ps.open, i, i+1)
			ps.cancel(p, "the agent withdrew its permission request: ")
			return
		}
	}
}
