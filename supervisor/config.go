package supervisor

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"shellagent/protocol"
)

// settings are a session's config options.
type settings struct {
	foregroundTimeout time.Duration
	killGrace         time.Duration
	ask               bool // permission mode "ask"
}

// Config option ids and the values each offers.
const (
	optForegroundTimeout = "foreground_timeout"
	optKillGrace         = "kill_grace"
	optPermission        = "permission"
)

var (
	timeoutChoices = []string{"0", "1s", "5s", "10s", "30s", "60s", "300s"}
	graceChoices   = []string{"1s", "3s", "10s", "30s"}
)

// durationOption describes a duration setting whose current value is d. A
// value set by flag that is not among the choices is offered too, so that
// the current value is always one of the options.
func durationOption(id, name, desc string, choices []string, d time.Duration) protocol.ConfigOption {
	opt := protocol.ConfigOption{Type: "select", ConfigID: id, Name: name, Description: desc}
	for _, c := range choices {
		v, _ := time.ParseDuration(c)
		label := c
		if v == 0 {
			label = "never"
		}
		opt.Options = append(opt.Options, protocol.ConfigChoice{Value: c, Name: label})
		if v == d && opt.CurrentValue == "" {
			opt.CurrentValue = c
		}
	}
	if opt.CurrentValue == "" {
		opt.CurrentValue = d.String()
		opt.Options = append(opt.Options, protocol.ConfigChoice{Value: d.String(), Name: d.String()})
	}
	return opt
}

func (st settings) options() []protocol.ConfigOption {
	perm := protocol.ConfigOption{
		Type: "select", ConfigID: optPermission, Name: "Permission",
		Description:  "ask: request permission before each command runs",
		CurrentValue: "allow",
		Options: []protocol.ConfigChoice{
			{Value: "allow", Name: "Run commands without asking"},
			{Value: "ask", Name: "Ask before each command"},
		},
	}
	if st.ask {
		perm.CurrentValue = "ask"
	}
	return []protocol.ConfigOption{
		durationOption(optForegroundTimeout, "Foreground timeout",
			"Move a command to the background after it has run this long in the foreground",
			timeoutChoices, st.foregroundTimeout),
		durationOption(optKillGrace, "Kill grace",
			"Time between SIGTERM and SIGKILL when stopping a command",
			graceChoices, st.killGrace),
		perm,
	}
}

// set applies one config option; an unknown id or value is a -32602 error
// that shows the exact request shape and lists the allowed values, and
// changes nothing.
func (st *settings) set(p *protocol.SetConfigOptionRequest) error {
	var current protocol.ConfigOption
	for _, o := range st.options() {
		if o.ConfigID == p.ConfigID {
			current = o
		}
	}
	if current.ConfigID == "" {
		return protocol.InvalidParams("configId: unknown option %q (options: %s, %s, %s)", p.ConfigID, optForegroundTimeout, optKillGrace, optPermission)
	}
	values := make([]string, len(current.Options))
	for i, c := range current.Options {
		values[i] = c.Value
	}
	shape := fmt.Sprintf(`send params {"sessionId":%q,"configId":%q,"type":"id","value":%q}, with value one of: %s`,
		p.SessionID, p.ConfigID, current.CurrentValue, strings.Join(values, ", "))
	if p.Type != "id" {
		return protocol.InvalidParams("type: %q is not supported; %s", p.Type, shape)
	}
	var value string
	if err := json.Unmarshal(p.Value, &value); err != nil {
		return protocol.InvalidParams("value: must be a string; %s", shape)
	}
	if !slices.Contains(values, value) {
		return protocol.InvalidParams("value: %q is not a value of %s; %s", value, p.ConfigID, shape)
	}
	switch p.ConfigID {
	case optForegroundTimeout:
		st.foregroundTimeout, _ = time.ParseDuration(value)
	case optKillGrace:
		st.killGrace, _ = time.ParseDuration(value)
	case optPermission:
		st.ask = value == "ask"
	}
	return nil
}
