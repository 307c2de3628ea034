package waitfor

import (
	"strings"
	"testing"
)

func TestParseReady(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text   string
		want   Ready // its Pattern as a string in pattern
		regexp string
		reason string // the start of the error, "" for none
	}{
		{text: ":8080", want: Ready{Target: Target{Port: 8080}}},
		{text: ":65535", want: Ready{Target: Target{Port: 65535}}},
		{text: "http://localhost:5173/", want: Ready{Target: Target{URL: "http://localhost:5173/"}}},
		{text: "https://[::1]/health", want: Ready{Target: Target{URL: "https://[::1]/health"}}},
		{text: "listening on", regexp: "(?m)listening on"},
		{text: `\:3000 up`, regexp: `(?m)\:3000 up`},
		{text: "exec:curl -sf localhost", want: Ready{Exec: "curl -sf localhost"}},
		{text: ":99999", reason: `:99999 is not a port (1 to 65535; a pattern that starts with ':' is written \:)`},
		{text: ":0", reason: ":0 is not a port"},
		{text: ":-1", reason: ":-1 is not a port"},
		{text: ":", reason: ": is not a port"},
		{text: ":80x", reason: ":80x is not a port"},
		{text: "(", reason: `"(" is not a regular expression (missing closing ): ` + "`(`)"},
		{text: "http://", reason: `"http://" is not a URL`},
		{text: "http://localhost:/", reason: `"http://localhost:/" is not a URL: its port is empty`},
		{text: "http://localhost:0/", reason: `"http://localhost:0/" is not a URL: its port 0 is not 1 to 65535`},
		{text: "exec:", reason: "exec: needs a command"},
		{text: "exec: \t", reason: "exec: needs a command"},
	} {
		got, err := ParseReady(tc.text)
		switch {
		case tc.reason != "":
			if err == nil || !strings.HasPrefix(err.Error(), tc.reason) {
				t.Errorf("ParseReady(%q): %v, want %q", tc.text, err, tc.reason)
			}
		case err != nil:
			t.Errorf("ParseReady(%q): %v", tc.text, err)
		case tc.regexp != "":
			if got.Pattern == nil || got.Pattern.String() != tc.regexp || got.Port != 0 || got.URL != "" || got.Exec != "" {
				t.Errorf("ParseReady(%q) = %+v, want the pattern %s alone", tc.text, got, tc.regexp)
			}
		case got != tc.want:
			t.Errorf("ParseReady(%q) = %+v, want %+v", tc.text, got, tc.want)
		}
	}
}
