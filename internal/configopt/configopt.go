// Package configopt is the shape of a session's config options as
// shellagent offers them (ACP session/set_config_option), apart from the
// settings they set: a select of durations or of two values, the
// durations the flags and requests take (ParseDuration), and the check of
// a request against the options a session offers (Check), whose refusal
// shows the request that would work. Package supervisor/settings holds
// the settings themselves, which options they offer, and what a value
// changes.
//
// Files: configopt.go.
package configopt

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"shellagent/acp"
)

// Duration describes a duration setting whose current value is d, with
// choices (durations that parse; 0 named "never") offered. A value set
// by flag that is not among the choices is offered too, so that the
// current value is always one of the options.
func Duration(id, name, desc string, choices []string, d time.Duration) acp.ConfigOption {
	opt := acp.ConfigOption{Type: "select", ConfigID: id, Name: name, Description: desc}
	for _, c := range choices {
		v, _ := time.ParseDuration(c) // Safe: the choices are constants that parse.
		label := c
		if v == 0 {
			label = "never"
		}
		opt.Options = append(opt.Options, acp.ConfigChoice{Value: c, Name: label})
		if v == d && opt.CurrentValue == "" {
			opt.CurrentValue = c
		}
	}
	if opt.CurrentValue == "" {
		opt.CurrentValue = d.String()
		opt.Options = append(opt.Options, acp.ConfigChoice{Value: d.String(), Name: d.String()})
	}
	return opt
}

// TwoWay describes a setting with two values, off and on; the current
// one is on's if isOn.
func TwoWay(id, name, desc string, off, on acp.ConfigChoice, isOn bool) acp.ConfigOption {
	opt := acp.ConfigOption{
		Type: "select", ConfigID: id, Name: name, Description: desc,
		CurrentValue: off.Value, Options: []acp.ConfigChoice{off, on},
	}
	if isOn {
		opt.CurrentValue = on.Value
	}
	return opt
}

// ParseDuration reads a duration setting as --foreground-timeout,
// --kill-grace and session/set_config_option take it: Go's form (10s,
// 500ms, 1m30s), not negative, and 0 only if zero (0 = never).
func ParseDuration(v string, zero bool) (time.Duration, error) {
	n, err := time.ParseDuration(v)
	if err != nil {
		if f, ferr := strconv.ParseFloat(v, 64); ferr == nil && f != 0 {
			return 0, fmt.Errorf("missing unit, e.g. %ss", v)
		}
		return 0, errors.New("want a duration such as 10s, 500ms or 1m30s")
	}
	switch {
	case n < 0:
		return 0, errors.New("must not be negative")
	case n == 0 && !zero:
		return 0, errors.New("must be more than 0, e.g. 3s")
	}
	return n, nil
}

// Check checks p against opts, the options a session offers, and returns
// the value it sets. durations names the duration options, each with
// whether it takes 0: they take any duration, as their flags do
// (ParseDuration), not only those offered, and d is the one set. An
// unknown id, a type other than "id" or a value not offered is a -32602
// error that shows the exact request shape and lists the allowed values.
func Check(p *acp.SetConfigOptionRequest, opts []acp.ConfigOption, durations map[string]bool) (value string, d time.Duration, err error) {
	var current acp.ConfigOption
	ids := make([]string, len(opts))
	for i, o := range opts {
		ids[i] = o.ConfigID
		if o.ConfigID == p.ConfigID {
			current = o
		}
	}
	if current.ConfigID == "" {
		return "", 0, acp.InvalidParams("configId: unknown option %q (options: %s)", p.ConfigID, strings.Join(ids, ", "))
	}
	values := make([]string, len(current.Options))
	for i, c := range current.Options {
		values[i] = c.Value
	}
	shape := fmt.Sprintf(`send params {"sessionId":%q,"configId":%q,"type":"id","value":%q}, with value one of: %s`,
		p.SessionID, p.ConfigID, current.CurrentValue, strings.Join(values, ", "))
	zero, isDuration := durations[p.ConfigID]
	if isDuration {
		shape += " or any other duration, e.g. 7s or 1m30s"
	}
	if p.Type != "id" {
		return "", 0, acp.InvalidParams("type: %q is not supported; %s", p.Type, shape)
	}
	if err := json.Unmarshal(p.Value, &value); err != nil {
		return "", 0, acp.InvalidParams("value: must be a string; %s", shape)
	}
	if isDuration { // any duration, as the flags take
		if d, err = ParseDuration(value, zero); err != nil {
			return "", 0, acp.InvalidParams("value: %q is not a value of %s: %v; %s", value, p.ConfigID, err, shape)
		}
	} else if !slices.Contains(values, value) {
		return "", 0, acp.InvalidParams("value: %q is not a value of %s; %s", value, p.ConfigID, shape)
	}
	return value, d, nil
}
