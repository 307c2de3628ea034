package watch

import "testing"

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rest, path, line, problem string
	}{
		{"src make test", "src", "make test", ""},
		{"'my dir' go test ./...", "my dir", "go test ./...", ""},
		{"src", "", "", "/watch needs a path and a command"},
		{"", "", "", "/watch needs a path and a command"},
	}
	for _, tt := range tests {
		spec, problem := Parse(tt.rest)
		if problem != tt.problem || problem == "" && (spec.Path != tt.path || spec.Line != tt.line) {
			t.Errorf("Parse(%q) = %+v, %q; want %q %q, %q", tt.rest, spec, problem, tt.path, tt.line, tt.problem)
		}
	}
}
