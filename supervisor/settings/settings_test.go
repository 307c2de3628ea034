package settings

import (
	"errors"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/supervisor/terminput"
)

func TestSettingsSet(t *testing.T) {
	t.Parallel()
	start := Settings{ForegroundTimeout: 10 * time.Second, KillGrace: 3 * time.Second}
	tests := []struct {
		id, typ, value string // value as JSON
		want           Settings
		err            string // a part of the -32602 message; "" = accepted
	}{
		{OptForegroundTimeout, "id", `"30s"`, Settings{ForegroundTimeout: 30 * time.Second, KillGrace: 3 * time.Second, Notify: terminput.NotifyFailures}, ""},
		{OptForegroundTimeout, "id", `"0"`, Settings{KillGrace: 3 * time.Second, Notify: terminput.NotifyFailures}, ""},
		{OptKillGrace, "id", `"10s"`, Settings{ForegroundTimeout: 10 * time.Second, KillGrace: 10 * time.Second, Notify: terminput.NotifyFailures}, ""},
		{OptPermission, "id", `"ask"`, Settings{ForegroundTimeout: 10 * time.Second, KillGrace: 3 * time.Second, Ask: true, Notify: terminput.NotifyFailures}, ""},
		{OptClientChecks, "id", `"on"`, Settings{ForegroundTimeout: 10 * time.Second, KillGrace: 3 * time.Second, ClientChecks: true, Notify: terminput.NotifyFailures}, ""},
		{OptClientChecks, "id", `"off"`, start, ""},
		{OptClientChecks, "id", `"yes"`, start, "is not a value of client_checks"},
		{OptPermission, "id", `"allow"`, start, ""},
		{terminput.OptNotify, "id", `"off"`, Settings{ForegroundTimeout: 10 * time.Second, KillGrace: 3 * time.Second, Notify: terminput.NotifyOff}, ""},
		{terminput.OptNotify, "id", `"all"`, Settings{ForegroundTimeout: 10 * time.Second, KillGrace: 3 * time.Second, Notify: terminput.NotifyAll}, ""},
		{terminput.OptNotify, "id", `"failures"`, start, ""},
		{terminput.OptNotify, "id", `"some"`, start, "is not a value of notify"},
		// Issue 23: "--set foreground_timeout=7s" was refused though
		// "--foreground-timeout 7s" works: any duration, as the flags take.
		{OptForegroundTimeout, "id", `"7s"`, Settings{ForegroundTimeout: 7 * time.Second, KillGrace: 3 * time.Second, Notify: terminput.NotifyFailures}, ""},
		{OptKillGrace, "id", `"1m30s"`, Settings{ForegroundTimeout: 10 * time.Second, KillGrace: 90 * time.Second, Notify: terminput.NotifyFailures}, ""},
		{OptForegroundTimeout, "id", `"7 seconds"`, start, `value: "7 seconds" is not a value of foreground_timeout: want a duration such as 10s, 500ms or 1m30s; send params`},
		{OptForegroundTimeout, "id", `"7"`, start, `value: "7" is not a value of foreground_timeout: missing unit, e.g. 7s;`},
		{OptForegroundTimeout, "id", `"-1s"`, start, "must not be negative"},
		{OptKillGrace, "id", `"0"`, start, `value: "0" is not a value of kill_grace: must be more than 0, e.g. 3s; send params {"sessionId":"","configId":"kill_grace","type":"id","value":"3s"}, with value one of: 1s, 3s, 10s, 30s or any other duration, e.g. 7s or 1m30s`},
		{OptPermission, "id", `"maybe"`, start, "is not a value of permission"},
		{OptPermission, "id", `3`, start, "value: must be a string"},
		{"colour", "id", `"red"`, start, `configId: unknown option "colour" (options: foreground_timeout, kill_grace, permission, notify, client_checks)`},
		{OptKillGrace, "boolean", `true`, start, `type: "boolean" is not supported`},
	}
	for _, tt := range tests {
		st := start
		err := st.Set(&acp.SetConfigOptionRequest{ConfigID: tt.id, Type: tt.typ, Value: []byte(tt.value)})
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("set %s=%s: %v", tt.id, tt.value, err)
		case tt.err != "" && (!isInvalidParams(err) || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("set %s=%s: %v, want -32602 saying %q", tt.id, tt.value, err, tt.err)
		}
		if st != tt.want {
			t.Errorf("set %s=%s left %+v, want %+v", tt.id, tt.value, st, tt.want)
		}
	}
}

// TestSettingsOfferTheCurrentValue: a duration set by flag (or set to any
// other duration) that is not among the choices is offered too, so that
// the current value is always one of the options; once changed, it is no
// longer offered.
func TestSettingsOfferTheCurrentValue(t *testing.T) {
	t.Parallel()
	st := Settings{ForegroundTimeout: 90 * time.Second, KillGrace: time.Second}
	opts := st.Options()
	fg, grace := opts[0], opts[1]
	if fg.CurrentValue != "1m30s" || fg.Options[len(fg.Options)-1].Value != "1m30s" || len(fg.Options) != len(timeoutChoices)+1 {
		t.Errorf("foreground_timeout %+v", fg)
	}
	if grace.CurrentValue != "1s" || len(grace.Options) != len(graceChoices) {
		t.Errorf("kill_grace %+v", grace)
	}
	if fg.Options[0].Name != "never" {
		t.Errorf("foreground_timeout 0 is named %q", fg.Options[0].Name)
	}
	if err := st.Set(&acp.SetConfigOptionRequest{ConfigID: OptForegroundTimeout, Type: "id", Value: []byte(`"5s"`)}); err != nil {
		t.Fatal(err)
	}
	if opts := st.Options(); len(opts[0].Options) != len(timeoutChoices) {
		t.Errorf("the flag's value is still offered after it was changed: %+v", opts[0])
	}
}

// isInvalidParams is whether err is a -32602 error.
func isInvalidParams(err error) bool {
	pe, ok := errors.AsType[*acp.Error](err)
	return ok && pe.Code == acp.CodeInvalidParams
}
