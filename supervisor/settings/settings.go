// Package settings is a session's settings, the config options a client
// changes with session/set_config_option: foreground_timeout, kill_grace,
// permission, notify and client_checks. It holds the values (Settings),
// the options they offer, in their order and with their texts (Options),
// and what a request changes (Set). The options' shape and the check of
// a request are internal/configopt's, the notify setting's values and
// option supervisor/terminput's. A new session's settings come from the
// supervisor's Config (supervisor/session.go); the supervisor reads them
// where a rule depends on one.
//
// Files: settings.go.
package settings

import (
	"time"

	"shellagent/acp"
	"shellagent/internal/configopt"
	"shellagent/supervisor/terminput"
)

// Settings are a session's config options. The zero value of each is
// its default but for the durations, which the supervisor's Config
// gives: permission allow, notify failures, client checks off. Its
// fields are those of the upgrade's handover.Settings, in their order,
// so that each converts to the other.
type Settings struct {
	ForegroundTimeout time.Duration // 0 = never
	KillGrace         time.Duration
	Ask               bool // permission mode "ask"
	ClientChecks      bool // client_checks "on"
	Notify            terminput.Notify
}

// Config option ids (notify's is terminput.OptNotify).
const (
	OptForegroundTimeout = "foreground_timeout"
	OptKillGrace         = "kill_grace"
	OptPermission        = "permission"
	OptClientChecks      = "client_checks"
)

var (
	timeoutChoices = []string{"0", "1s", "5s", "10s", "30s", "60s", "300s"}
	graceChoices   = []string{"1s", "3s", "10s", "30s"}
	// durationOptions are the duration options, each with whether it
	// takes 0 (never).
	durationOptions = map[string]bool{OptForegroundTimeout: true, OptKillGrace: false}
)

// Options are the config options the settings offer, in order, their
// current values s's.
func (s Settings) Options() []acp.ConfigOption {
	perm := configopt.TwoWay(OptPermission, "Permission", "ask: request permission before each command runs",
		acp.ConfigChoice{Value: "allow", Name: "Run commands without asking"},
		acp.ConfigChoice{Value: "ask", Name: "Ask before each command"}, s.Ask)
	checks := configopt.TwoWay(OptClientChecks, "Client checks",
		"on: report what this client does against the protocol's client-side rules as warning notices",
		acp.ConfigChoice{Value: "off", Name: "Don't report"},
		acp.ConfigChoice{Value: "on", Name: "Report each as a notice"}, s.ClientChecks)
	return []acp.ConfigOption{
		configopt.Duration(OptForegroundTimeout, "Foreground timeout",
			"Move a command to the background after it has run this long in the foreground",
			timeoutChoices, s.ForegroundTimeout),
		configopt.Duration(OptKillGrace, "Kill grace",
			"Time between SIGTERM and SIGKILL when stopping a command",
			graceChoices, s.KillGrace),
		perm,
		s.Notify.Option(),
		checks,
	}
}

// Set applies one config option; an unknown id or value is a -32602 error
// that shows the exact request shape and lists the allowed values, and
// changes nothing (configopt.Check). The duration options take any
// duration, as their flags do, not only those offered.
func (s *Settings) Set(p *acp.SetConfigOptionRequest) error {
	value, d, err := configopt.Check(p, s.Options(), durationOptions)
	if err != nil {
		return err
	}
	switch p.ConfigID {
	case OptForegroundTimeout:
		s.ForegroundTimeout = d
	case OptKillGrace:
		s.KillGrace = d
	case OptPermission:
		s.Ask = value == "ask"
	case terminput.OptNotify:
		s.Notify = terminput.ParseNotify(value)
	case OptClientChecks:
		s.ClientChecks = value == "on"
	}
	return nil
}
