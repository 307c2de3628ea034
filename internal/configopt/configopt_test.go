package configopt

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
)

// offered is a session's options as the tests take them: two durations
// (one that takes 0) and a two-way setting.
func offered(fg, grace time.Duration) []acp.ConfigOption {
	return []acp.ConfigOption{
		Duration("foreground_timeout", "Foreground timeout", "", []string{"0", "1s", "5s", "10s", "30s", "60s", "300s"}, fg),
		Duration("kill_grace", "Kill grace", "", []string{"1s", "3s", "10s", "30s"}, grace),
		TwoWay("permission", "Permission", "", acp.ConfigChoice{Value: "allow"}, acp.ConfigChoice{Value: "ask"}, false),
	}
}

var durations = map[string]bool{"foreground_timeout": true, "kill_grace": false}

// TestDurationOffersTheCurrentValue: a duration set by flag (or set to any
// other duration) that is not among the choices is offered too, so that
// the current value is always one of the options; one among them is not
// offered twice. 0 is named never.
func TestDurationOffersTheCurrentValue(t *testing.T) {
	choices := []string{"0", "1s", "5s"}
	for _, tc := range []struct {
		d       time.Duration
		current string
		n       int // options offered
	}{
		{0, "0", 3},
		{5 * time.Second, "5s", 3},
		{90 * time.Second, "1m30s", 4},
		{500 * time.Millisecond, "500ms", 4},
	} {
		opt := Duration("id", "Name", "desc", choices, tc.d)
		if opt.CurrentValue != tc.current || len(opt.Options) != tc.n || opt.Options[0].Name != "never" {
			t.Errorf("Duration(%v) = %+v, want current %s of %d options, the first named never", tc.d, opt, tc.current, tc.n)
		}
		if last := opt.Options[len(opt.Options)-1]; tc.n > len(choices) && (last.Value != tc.current || last.Name != tc.current) {
			t.Errorf("Duration(%v) offers %+v last, want its current value", tc.d, last)
		}
	}
}

// TestTwoWay: the current value is on's if it is on.
func TestTwoWay(t *testing.T) {
	off, on := acp.ConfigChoice{Value: "off"}, acp.ConfigChoice{Value: "on"}
	for _, isOn := range []bool{false, true} {
		opt := TwoWay("id", "Name", "desc", off, on, isOn)
		want := map[bool]string{false: "off", true: "on"}[isOn]
		if opt.CurrentValue != want || len(opt.Options) != 2 || opt.Type != "select" {
			t.Errorf("TwoWay(%v) = %+v", isOn, opt)
		}
	}
}

// TestParseDuration: Go's form, not negative, 0 only where it is allowed,
// and a number without a unit named as such.
func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		zero bool
		want time.Duration
		err  string
	}{
		{"10s", false, 10 * time.Second, ""},
		{"1m30s", false, 90 * time.Second, ""},
		{"0", true, 0, ""},
		{"0s", true, 0, ""},
		{"0", false, 0, "must be more than 0, e.g. 3s"},
		{"-1s", true, 0, "must not be negative"},
		{"7", true, 0, "missing unit, e.g. 7s"},
		{"2.5", true, 0, "missing unit, e.g. 2.5s"},
		{"7 seconds", true, 0, "want a duration such as 10s, 500ms or 1m30s"},
	} {
		d, err := ParseDuration(tc.in, tc.zero)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.err || d != tc.want {
			t.Errorf("ParseDuration(%q, %v) = %v, %q; want %v, %q", tc.in, tc.zero, d, got, tc.want, tc.err)
		}
	}
}

// TestCheck: the value a request sets, or the -32602 error that says why
// not.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		id, typ, value string // value as JSON
		want           string
		d              time.Duration
		err            string // the -32602 message; "" = accepted
	}{
		{"permission", "id", `"ask"`, "ask", 0, ""},
		{"foreground_timeout", "id", `"0"`, "0", 0, ""},
		{"foreground_timeout", "id", `"7s"`, "7s", 7 * time.Second, ""},
		{"kill_grace", "id", `"1m30s"`, "1m30s", 90 * time.Second, ""},
		{"kill_grace", "id", `"0"`, "", 0, `value: "0" is not a value of kill_grace: must be more than 0, e.g. 3s; send params {"sessionId":"","configId":"kill_grace","type":"id","value":"3s"}, with value one of: 1s, 3s, 10s, 30s or any other duration, e.g. 7s or 1m30s`},
		{"permission", "id", `"maybe"`, "", 0, `value: "maybe" is not a value of permission; send params {"sessionId":"","configId":"permission","type":"id","value":"allow"}, with value one of: allow, ask`},
		{"permission", "id", `3`, "", 0, `value: must be a string; send params {"sessionId":"","configId":"permission","type":"id","value":"allow"}, with value one of: allow, ask`},
		{"colour", "id", `"red"`, "", 0, `configId: unknown option "colour" (options: foreground_timeout, kill_grace, permission)`},
		{"kill_grace", "boolean", `true`, "", 0, `type: "boolean" is not supported; send params {"sessionId":"","configId":"kill_grace","type":"id","value":"3s"}, with value one of: 1s, 3s, 10s, 30s or any other duration, e.g. 7s or 1m30s`},
	} {
		value, d, err := Check(&acp.SetConfigOptionRequest{ConfigID: tc.id, Type: tc.typ, Value: []byte(tc.value)}, offered(10*time.Second, 3*time.Second), durations)
		if tc.err == "" {
			if err != nil || value != tc.want || d != tc.d {
				t.Errorf("Check %s=%s = %q, %v, %v; want %q, %v", tc.id, tc.value, value, d, err, tc.want, tc.d)
			}
			continue
		}
		if e, ok := err.(*acp.Error); !ok || e.Code != acp.CodeInvalidParams || e.Message != tc.err {
			t.Errorf("Check %s=%s: %v, want -32602 %q", tc.id, tc.value, err, tc.err)
		}
	}
}

// A rejected session/set_config_option says which request shape works and
// lists the allowed values; sending the shape it shows succeeds.
func TestCheckErrorsShowTheShape(t *testing.T) {
	tests := []struct {
		params string
		says   []string
	}{
		{`{"sessionId":"s","configId":"foreground_timeout","value":{"type":"id","value":"5s"}}`,
			[]string{`type: ""`, "0, 1s, 5s, 10s, 30s, 60s, 300s"}},
		{`{"sessionId":"s","configId":"kill_grace","type":"boolean","value":true}`,
			[]string{`type: "boolean"`, "1s, 3s, 10s, 30s"}},
		{`{"sessionId":"s","configId":"permission","type":"id","value":3}`,
			[]string{"value: must be a string", "allow, ask"}},
		{`{"sessionId":"s","configId":"foreground_timeout","type":"id","value":"7 seconds"}`,
			[]string{`value: "7 seconds" is not a value of foreground_timeout`, "0, 1s, 5s, 10s, 30s, 60s, 300s or any other duration"}},
	}
	shape := regexp.MustCompile(`send params (\{.*\}), with value`)
	opts := offered(10*time.Second, 3*time.Second)
	for _, tt := range tests {
		var p acp.SetConfigOptionRequest
		if err := json.Unmarshal([]byte(tt.params), &p); err != nil {
			t.Fatal(err)
		}
		_, _, err := Check(&p, opts, durations)
		if err == nil {
			t.Errorf("%s: accepted", tt.params)
			continue
		}
		msg := err.(*acp.Error).Message
		for _, s := range tt.says {
			if !strings.Contains(msg, s) {
				t.Errorf("%s:\n  error %q\n  does not say %q", tt.params, msg, s)
			}
		}
		m := shape.FindStringSubmatch(msg)
		if m == nil {
			t.Errorf("%s: error %q shows no request shape", tt.params, msg)
			continue
		}
		var fixed acp.SetConfigOptionRequest
		if err := json.Unmarshal([]byte(m[1]), &fixed); err != nil {
			t.Errorf("the shape %s is not JSON: %v", m[1], err)
			continue
		}
		if _, _, err := Check(&fixed, opts, durations); err != nil {
			t.Errorf("the shape %s it shows fails too: %v", m[1], err)
		}
	}
}
