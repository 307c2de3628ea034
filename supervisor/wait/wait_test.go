package wait

import (
	"strings"
	"testing"
	"time"
)

func TestParseWait(t *testing.T) {
	t.Parallel()
	const def = DefaultTimeout
	tests := []struct {
		line    string
		want    Spec // but Pattern
		pattern bool
	}{
		{"/wait term_1", Spec{Term: "term_1", Timeout: def}, false},
		{"/wait term_1 'ready on' --timeout 30s", Spec{Term: "term_1", Text: "ready on", Timeout: 30 * time.Second}, true},
		{"/wait term_1 ready on", Spec{Term: "term_1", Text: "ready on", Timeout: def}, true},
		{`/wait term_1 --new "say \"hi\"" --timeout=1h`, Spec{Term: "term_1", Text: `say "hi"`, Timeout: time.Hour, Fresh: true}, true},
		{`/wait term_1 \d+ms`, Spec{Term: "term_1", Text: `\d+ms`, Timeout: def}, true},
		{`/wait term_1 '--new'`, Spec{Term: "term_1", Text: "--new", Timeout: def}, true},
		{`/wait term_1 \-\-new`, Spec{Term: "term_1", Text: `\-\-new`, Timeout: def}, true}, // a regular expression for --new
		{"/wait term_1 :3000", Spec{Term: "term_1", Text: ":3000", Port: 3000, Timeout: def}, false},
		{`/wait term_1 \:3000x`, Spec{Term: "term_1", Text: `\:3000x`, Timeout: def}, true}, // a pattern that starts with ':'
		{"/wait term_1 :65535", Spec{Term: "term_1", Text: ":65535", Port: 65535, Timeout: def}, false},
		{"/wait term_1 https://[::1]:8443/x", Spec{Term: "term_1", Text: "https://[::1]:8443/x", URL: "https://[::1]:8443/x", Timeout: def}, false},
		{"/wait term_2 http://localhost:3000/ --timeout 1m", Spec{Term: "term_2", Text: "http://localhost:3000/", URL: "http://localhost:3000/", Timeout: time.Minute}, false},
	}
	for _, tt := range tests {
		spec, problem := Parse(strings.TrimPrefix(tt.line, "/wait "))
		if problem != "" {
			t.Errorf("Parse(%q): %s", tt.line, problem)
			continue
		}
		got := *spec
		if (got.Pattern != nil) != tt.pattern {
			t.Errorf("Parse(%q): pattern %v", tt.line, got.Pattern)
		}
		got.Pattern = nil
		if got != tt.want {
			t.Errorf("Parse(%q) = %+v, want %+v", tt.line, got, tt.want)
		}
	}
}
