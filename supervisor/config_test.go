package supervisor

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"shellagent/protocol"
)

// A rejected session/set_config_option says which request shape works and
// lists the allowed values; sending the shape it shows succeeds.
func TestSetConfigOptionErrorsShowTheShape(t *testing.T) {
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
		{`{"sessionId":"s","configId":"foreground_timeout","type":"id","value":"7s"}`,
			[]string{`value: "7s" is not a value of foreground_timeout`, "0, 1s, 5s, 10s, 30s, 60s, 300s"}},
	}
	shape := regexp.MustCompile(`send params (\{.*\}), with value`)
	for _, tt := range tests {
		st := settings{foregroundTimeout: 10 * time.Second, killGrace: 3 * time.Second}
		var p protocol.SetConfigOptionRequest
		if err := json.Unmarshal([]byte(tt.params), &p); err != nil {
			t.Fatal(err)
		}
		err := st.set(&p)
		if err == nil {
			t.Errorf("%s: accepted", tt.params)
			continue
		}
		msg := err.(*protocol.Error).Message
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
		var fixed protocol.SetConfigOptionRequest
		if err := json.Unmarshal([]byte(m[1]), &fixed); err != nil {
			t.Errorf("the shape %s is not JSON: %v", m[1], err)
			continue
		}
		if err := st.set(&fixed); err != nil {
			t.Errorf("the shape %s it shows fails too: %v", m[1], err)
		}
	}
}
